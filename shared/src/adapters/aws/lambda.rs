//! `LambdaDispatch`: the `Dispatch` port over Lambda Invoke, used by the `mcp` front on AWS.
//!
//! A `tools/call` becomes one synchronous Invoke (`RequestResponse`) of the class function that
//! owns the tool ([`ToolClass`]), with a [`ToolInvocation`] as the payload; its [`ToolReply`]
//! comes back as the tool's outcome. The scope check runs here too, before anything is sent
//! (the HTTP layer has already answered 403; this is the second lock, as in `InProcess`).
//!
//! Failures that are not the tool's own (the Invoke fails, the function crashes and Lambda
//! answers with `FunctionError`, or the reply does not parse) become
//! `ToolError::Unavailable` with a [`DispatchError`] cause: the client sees an internal error
//! with a correlation id; the cause goes to the front's log once.

use async_trait::async_trait;
use aws_sdk_lambda::primitives::Blob;
use aws_sdk_lambda::types::InvocationType;
use serde_json::{Map, Value};

use crate::auth::Principal;
use crate::tools::invocation::{ToolInvocation, ToolReply};
use crate::tools::resources::READ_RESOURCE;
use crate::tools::{Dispatch, Output, ToolClass, ToolError, permitted};

#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    #[error("invoking the {function} function failed")]
    Invoke {
        function: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The function ran but did not return (a panic, a timeout, out of memory).
    #[error("the {function} function failed ({kind}): {detail}")]
    Function {
        function: String,
        kind: String,
        detail: String,
    },
    #[error("the {function} function's reply is not a tool reply")]
    Reply {
        function: String,
        #[source]
        source: serde_json::Error,
    },
}

/// Forwards tool calls (and the web app's operations) to the class functions.
#[derive(Debug, Clone)]
pub struct LambdaDispatch {
    client: aws_sdk_lambda::Client,
    functions: ClassFunctions,
}

/// The names (or ARNs) of the functions the front invokes, one per [`ToolClass`].
#[derive(Debug, Clone)]
pub struct ClassFunctions {
    pub pages: String,
    pub tasks: String,
    pub account: String,
}

impl LambdaDispatch {
    pub fn new(client: aws_sdk_lambda::Client, functions: ClassFunctions) -> Self {
        LambdaDispatch { client, functions }
    }

    fn function(&self, class: ToolClass) -> &str {
        match class {
            ToolClass::Pages => &self.functions.pages,
            ToolClass::Tasks => &self.functions.tasks,
            ToolClass::Account => &self.functions.account,
        }
    }

    async fn invoke(&self, function: &str, payload: Vec<u8>) -> Result<ToolReply, DispatchError> {
        let out = self
            .client
            .invoke()
            .function_name(function)
            .invocation_type(InvocationType::RequestResponse)
            .payload(Blob::new(payload))
            .send()
            .await
            .map_err(|e| DispatchError::Invoke {
                function: function.to_owned(),
                source: Box::new(e),
            })?;
        let body = out.payload.map(Blob::into_inner).unwrap_or_default();
        if let Some(kind) = out.function_error {
            return Err(DispatchError::Function {
                function: function.to_owned(),
                kind,
                detail: String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned(),
            });
        }
        serde_json::from_slice(&body).map_err(|source| DispatchError::Reply {
            function: function.to_owned(),
            source,
        })
    }
}

#[async_trait]
impl Dispatch for LambdaDispatch {
    async fn call(
        &self,
        principal: &Principal,
        name: &str,
        args: Map<String, Value>,
    ) -> Result<Output, ToolError> {
        let tool = permitted(principal, name)?;
        let function = self.function(tool.class);
        let payload = serde_json::to_vec(&ToolInvocation {
            principal: principal.clone(),
            tool: name.to_owned(),
            arguments: args,
        })
        .expect("an invocation serializes");
        match self.invoke(function, payload).await {
            Ok(reply) => reply.into_outcome(function),
            Err(e) => Err(ToolError::Unavailable(Box::new(e))),
        }
    }

    /// One Invoke of the pages function (it reads pages and, in the same partition, tasks).
    async fn read_resource(
        &self,
        principal: &Principal,
        uri: &str,
    ) -> Result<Vec<Value>, ToolError> {
        let function = self.function(ToolClass::Pages);
        let mut arguments = Map::new();
        arguments.insert("uri".into(), Value::String(uri.to_owned()));
        let payload = serde_json::to_vec(&ToolInvocation {
            principal: principal.clone(),
            tool: READ_RESOURCE.to_owned(),
            arguments,
        })
        .expect("an invocation serializes");
        let output = match self.invoke(function, payload).await {
            Ok(reply) => reply.into_outcome(function)?,
            Err(e) => return Err(ToolError::Unavailable(Box::new(e))),
        };
        match serde_json::from_str(output.get()) {
            Ok(Value::Array(contents)) => Ok(contents),
            _ => Err(ToolError::Unavailable(Box::new(DispatchError::Function {
                function: function.to_owned(),
                kind: "BadReply".into(),
                detail: "resources/read did not answer a contents array".into(),
            }))),
        }
    }
}
