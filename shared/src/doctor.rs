//! `nib doctor`: checks a deployment the way its operator can, one line per check, each `ok`
//! or a cause and its fix. Read-only but for a probe item (written, read back, deleted), a
//! data key generated under a throwaway user id, and a temporary read token (created, used to
//! list the tools, revoked). The checks need the AWS back end (feature `aws`); [`Check`] is
//! `nib smoke`'s too.

#[cfg(feature = "aws")]
use crate::{
    adapters::aws::AwsClients,
    auth::Scope,
    config::AwsConfig,
    domain::UserId,
    ports::{Cond, Item, Keys, Write},
    services::Services,
};

/// The user id the probes use: valid, and no person's.
pub const PROBE_USER: &str = "nib-doctor-probe";

/// One check: what it looked at, and `Err((cause, fix))` when it failed.
#[derive(Debug)]
pub struct Check {
    pub name: String,
    pub outcome: Result<(), (String, String)>,
}

impl Check {
    #[cfg(feature = "aws")]
    fn new(name: &str, outcome: Result<(), (String, String)>) -> Check {
        if let Err((cause, _)) = &outcome {
            tracing::warn!(check = name, %cause, "doctor check failed");
        }
        Check {
            name: name.into(),
            outcome,
        }
    }

    /// `name: ok` or `name: FAIL: cause -> fix`.
    pub fn line(&self) -> String {
        match &self.outcome {
            Ok(()) => format!("{}: ok", self.name),
            Err((cause, fix)) => format!("{}: FAIL: {cause} -> {fix}", self.name),
        }
    }
}

#[cfg(feature = "aws")]
fn fail<T>(cause: impl Into<String>, fix: &str) -> Result<T, (String, String)> {
    Err((cause.into(), fix.into()))
}

#[cfg(feature = "aws")]
const APPLY: &str = "terraform -chdir=infra apply (infra/ creates it so)";

/// Every check of the AWS deployment of `config`, over the services an operator's `app` (from
/// [`Services::open_aws_admin`]) uses. The connector checks run when `config.public_url` is set.
#[cfg(feature = "aws")]
pub async fn check_aws(config: &AwsConfig, app: &Services) -> Vec<Check> {
    let clients = AwsClients::connect(config).await;
    let mut checks = Vec::new();
    checks.push(Check::new(
        "table keys and index",
        table_shape(config, &clients).await,
    ));
    checks.push(Check::new(
        "table TTL on expires_at",
        table_ttl(config, &clients).await,
    ));
    checks.push(Check::new(
        "bucket public-access block",
        public_access_block(config, &clients).await,
    ));
    checks.push(Check::new(
        "bucket encryption",
        bucket_encryption(config, &clients).await,
    ));
    checks.push(Check::new(
        "bucket upload notification",
        upload_notification(config, &clients).await,
    ));
    checks.push(Check::new(
        "data key usable (GenerateDataKey)",
        data_key(config, &clients).await,
    ));
    checks.push(Check::new(
        "table round trip (write, read, delete)",
        round_trip(app).await,
    ));
    checks.push(Check::new(
        "a user can sign in (user index)",
        sign_in_user(app).await,
    ));
    match &config.public_url {
        None => checks.push(Check::new(
            "connector",
            fail(
                "no public URL is known",
                "set NIB_PUBLIC_URL, or use --from-terraform",
            ),
        )),
        Some(url) => checks.extend(connector(url, app).await),
    }
    checks
}

/// Some indexed user has a sign-in password (the owner `make deploy` creates), so the consent
/// page can let someone in; listing users also proves the operator reaches the `USERS` index.
#[cfg(feature = "aws")]
async fn sign_in_user(app: &Services) -> Result<(), (String, String)> {
    match app.accounts().list().await {
        Ok(users) if users.iter().any(|u| u.has_password && !u.deleting) => Ok(()),
        Ok(_) => fail(
            "no user has a sign-in password, so nobody can connect a client",
            "nib --from-terraform user ensure-owner (the last step of make deploy)",
        ),
        Err(e) => fail(
            format!("cannot list the users: {}", crate::telemetry::chain(&e)),
            "attach the operator policy (its LeadingKeys include USERS) to this caller's role",
        ),
    }
}

#[cfg(feature = "aws")]
fn sdk_error(e: &(dyn std::error::Error + 'static)) -> String {
    crate::telemetry::chain(e)
}

#[cfg(feature = "aws")]
async fn table_shape(config: &AwsConfig, clients: &AwsClients) -> Result<(), (String, String)> {
    let out = match clients
        .dynamodb
        .describe_table()
        .table_name(&config.table)
        .send()
        .await
    {
        Ok(out) => out,
        Err(e) => {
            return fail(
                format!(
                    "cannot describe the table {}: {}",
                    config.table,
                    sdk_error(&e)
                ),
                "check NIB_TABLE (output table_name) and that infra/ was applied",
            );
        }
    };
    let Some(table) = out.table() else {
        return fail(
            format!("the table {} has no description", config.table),
            APPLY,
        );
    };
    let keys: Vec<(String, String)> = table
        .key_schema()
        .iter()
        .map(|k| {
            (
                k.attribute_name().to_owned(),
                k.key_type().as_str().to_owned(),
            )
        })
        .collect();
    let want = [
        ("pk".to_owned(), "HASH".to_owned()),
        ("sk".to_owned(), "RANGE".to_owned()),
    ];
    if keys != want {
        return fail(
            format!("the table's keys are {keys:?}, not pk (hash) and sk (range)"),
            APPLY,
        );
    }
    let index = table
        .global_secondary_indexes()
        .iter()
        .find(|i| i.index_name() == Some(crate::adapters::aws::dynamo::GSI1));
    let Some(index) = index else {
        return fail("the table has no index gsi1", APPLY);
    };
    let keys: Vec<&str> = index
        .key_schema()
        .iter()
        .map(|k| k.attribute_name())
        .collect();
    if keys != ["gsi1pk", "gsi1sk"] {
        return fail(
            format!("the index gsi1 is keyed on {keys:?}, not gsi1pk and gsi1sk"),
            APPLY,
        );
    }
    Ok(())
}

#[cfg(feature = "aws")]
async fn table_ttl(config: &AwsConfig, clients: &AwsClients) -> Result<(), (String, String)> {
    let out = match clients
        .dynamodb
        .describe_time_to_live()
        .table_name(&config.table)
        .send()
        .await
    {
        Ok(out) => out,
        Err(e) => {
            return fail(
                format!("cannot read the table's TTL: {}", sdk_error(&e)),
                "check NIB_TABLE and the operator policy (dynamodb:DescribeTimeToLive)",
            );
        }
    };
    let ttl = out.time_to_live_description();
    let status = ttl
        .and_then(|t| t.time_to_live_status())
        .map(|s| s.as_str().to_owned())
        .unwrap_or_default();
    let attribute = ttl.and_then(|t| t.attribute_name()).unwrap_or_default();
    if !matches!(status.as_str(), "ENABLED" | "ENABLING") || attribute != "expires_at" {
        return fail(
            format!(
                "TTL is {} on {:?}: expired codes, refresh tokens and counters stay forever",
                if status.is_empty() { "off" } else { &status },
                attribute
            ),
            "enable TTL on expires_at (terraform -chdir=infra apply; dynamodb.tf sets it)",
        );
    }
    Ok(())
}

#[cfg(feature = "aws")]
async fn public_access_block(
    config: &AwsConfig,
    clients: &AwsClients,
) -> Result<(), (String, String)> {
    let fix = "block all public access on the bucket (terraform -chdir=infra apply; s3.tf sets it)";
    match clients
        .s3
        .get_public_access_block()
        .bucket(&config.bucket)
        .send()
        .await
    {
        Ok(out) => {
            let c = out.public_access_block_configuration();
            let all = c.is_some_and(|c| {
                c.block_public_acls() == Some(true)
                    && c.ignore_public_acls() == Some(true)
                    && c.block_public_policy() == Some(true)
                    && c.restrict_public_buckets() == Some(true)
            });
            if all {
                Ok(())
            } else {
                fail(
                    format!(
                        "the bucket {} does not block every kind of public access",
                        config.bucket
                    ),
                    fix,
                )
            }
        }
        Err(e) => fail(
            format!(
                "the bucket {} has no public-access block ({})",
                config.bucket,
                sdk_error(&e)
            ),
            fix,
        ),
    }
}

#[cfg(feature = "aws")]
async fn bucket_encryption(
    config: &AwsConfig,
    clients: &AwsClients,
) -> Result<(), (String, String)> {
    let fix =
        "encrypt the bucket with the storage key (terraform -chdir=infra apply; s3.tf sets it)";
    match clients
        .s3
        .get_bucket_encryption()
        .bucket(&config.bucket)
        .send()
        .await
    {
        Ok(out)
            if out
                .server_side_encryption_configuration()
                .is_some_and(|c| !c.rules().is_empty()) =>
        {
            Ok(())
        }
        Ok(_) => fail(
            format!("the bucket {} has no encryption rule", config.bucket),
            fix,
        ),
        Err(e) => fail(
            format!(
                "cannot read the bucket {}'s encryption ({})",
                config.bucket,
                sdk_error(&e)
            ),
            fix,
        ),
    }
}

#[cfg(feature = "aws")]
async fn upload_notification(
    config: &AwsConfig,
    clients: &AwsClients,
) -> Result<(), (String, String)> {
    let fix = "notify the ingest function of objects created under uploads/ (terraform -chdir=infra apply; s3.tf sets it)";
    let out = match clients
        .s3
        .get_bucket_notification_configuration()
        .bucket(&config.bucket)
        .send()
        .await
    {
        Ok(out) => out,
        Err(e) => {
            return fail(
                format!("cannot read the bucket's notifications ({})", sdk_error(&e)),
                fix,
            );
        }
    };
    let to_ingest = out.lambda_function_configurations().iter().any(|c| {
        c.events()
            .iter()
            .any(|e| e.as_str().starts_with("s3:ObjectCreated"))
            && c.filter().and_then(|f| f.key()).is_some_and(|k| {
                k.filter_rules()
                    .iter()
                    .any(|r| r.value() == Some(crate::uploads::UPLOAD_PREFIX))
            })
    });
    if to_ingest {
        Ok(())
    } else {
        fail(
            "no function hears of uploads: files under uploads/ are never imported",
            fix,
        )
    }
}

#[cfg(feature = "aws")]
async fn data_key(config: &AwsConfig, clients: &AwsClients) -> Result<(), (String, String)> {
    let probe = UserId::parse(PROBE_USER).expect("a valid user id");
    match clients.keys(config).generate(&probe).await {
        Ok(_) => Ok(()),
        Err(e) => fail(
            format!(
                "this caller cannot use the data key {}: {}",
                config.kms_key_id,
                crate::telemetry::chain(&e)
            ),
            "list the operator's role in operator_role_arns (infra/variables.tf) and attach the operator policy, then apply",
        ),
    }
}

#[cfg(feature = "aws")]
async fn round_trip(app: &Services) -> Result<(), (String, String)> {
    let fix = "attach the operator policy (output operator_policy_arn) to this caller's role";
    let (pk, sk) = (format!("U#{PROBE_USER}"), "DOCTOR#probe".to_owned());
    let item = Item {
        pk: pk.clone(),
        sk: sk.clone(),
        gsi1: None,
        version: 1,
        expires_at: Some(app.clock.unix() + 3600),
        body: b"{}".to_vec(),
    };
    if let Err(e) = app.store.put(item, Cond::None).await {
        return fail(
            format!("cannot write a probe item: {}", crate::telemetry::chain(&e)),
            fix,
        );
    }
    match app.store.get(&pk, &sk).await {
        Ok(Some(_)) => {}
        Ok(None) => {
            return fail(
                "the probe item written is not there",
                "check that NIB_TABLE names one table for every caller",
            );
        }
        Err(e) => {
            return fail(
                format!(
                    "cannot read the probe item: {}",
                    crate::telemetry::chain(&e)
                ),
                fix,
            );
        }
    }
    if let Err(e) = app
        .store
        .transact(vec![Write::Delete {
            pk,
            sk,
            cond: Cond::None,
        }])
        .await
    {
        return fail(
            format!(
                "cannot delete the probe item: {}",
                crate::telemetry::chain(&e)
            ),
            fix,
        );
    }
    Ok(())
}

/// The connector as a client meets it: the 401 and its `resource_metadata`, the
/// authorization server's metadata and issuer, and a temporary read token listing the tools.
#[cfg(feature = "aws")]
async fn connector(public_url: &str, app: &Services) -> Vec<Check> {
    let http = reqwest::Client::new();
    let mcp = format!("{public_url}/mcp");
    let mut checks = Vec::new();
    let unreachable = |e: reqwest::Error| {
        (
            format!("{mcp} does not answer: {}", crate::telemetry::chain(&e)),
            "check the connector URL (output connector_url) and the API's stage".to_owned(),
        )
    };
    let challenge = async {
        let r = http
            .post(&mcp)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
            .send()
            .await
            .map_err(unreachable)?;
        if r.status() != 401 {
            return fail(
                format!("an unauthenticated POST got {}, not 401", r.status()),
                "check that the route POST /mcp reaches the mcp function",
            );
        }
        let Some(metadata) = resource_metadata(r.headers()) else {
            return fail(
                "the 401 names no resource_metadata",
                "set NIB_PUBLIC_URL on mcp (infra/ does) and keep OAuth on",
            );
        };
        let r = http.get(&metadata).send().await.map_err(unreachable)?;
        let doc: serde_json::Value = if r.status().is_success() {
            r.json().await.unwrap_or_default()
        } else {
            serde_json::Value::Null
        };
        if doc.get("authorization_servers").is_none() {
            return fail(
                format!("{metadata} is no protected-resource metadata"),
                "check the route GET /.well-known/* reaches the oauth function",
            );
        }
        Ok(())
    };
    checks.push(Check::new(
        "connector answers 401 with resource_metadata",
        challenge.await,
    ));
    let issuer = async {
        let url = format!("{public_url}/.well-known/oauth-authorization-server");
        let r = http.get(&url).send().await.map_err(unreachable)?;
        let doc: serde_json::Value = if r.status().is_success() {
            r.json().await.unwrap_or_default()
        } else {
            serde_json::Value::Null
        };
        match doc.get("issuer").and_then(|i| i.as_str()) {
            Some(i) if i == public_url => Ok(()),
            Some(i) => fail(
                format!("the issuer is {i}, not {public_url}"),
                "set NIB_PUBLIC_URL to the connector's base URL on every function",
            ),
            None => fail(
                format!("{url} is no authorization-server metadata"),
                "check the route GET /.well-known/* reaches the oauth function",
            ),
        }
    };
    checks.push(Check::new("well-known documents and issuer", issuer.await));
    let tools = async {
        let probe = UserId::parse(PROBE_USER).expect("a valid user id");
        let token = app
            .tokens
            .create(
                &probe,
                Scope::Read,
                Some("nib doctor (revoked at once)".into()),
            )
            .await
            .map_err(|e| {
                (
                    format!(
                        "cannot create a temporary token: {}",
                        crate::telemetry::chain(&e)
                    ),
                    "attach the operator policy to this caller's role".to_owned(),
                )
            })?;
        let listed = async {
            let r = http
                .post(&mcp)
                .bearer_auth(&token.token)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
                .send()
                .await
                .map_err(unreachable)?;
            let status = r.status();
            let body = r.text().await.unwrap_or_default();
            if status.is_success() && body.contains("\"tools\"") {
                Ok(())
            } else {
                fail(
                    format!("tools/list with a read token got {status}"),
                    "check that mcp reads the same table (NIB_TABLE) as this caller",
                )
            }
        }
        .await;
        let revoked = app.tokens.revoke(&probe, &token.record.token_id).await;
        listed?;
        revoked.map(|_| ()).map_err(|e| {
            (
                format!(
                    "cannot revoke the temporary token {}: {}",
                    token.record.token_id,
                    crate::telemetry::chain(&e)
                ),
                format!(
                    "revoke it: nib token revoke {} --user {PROBE_USER}",
                    token.record.token_id
                ),
            )
        })
    };
    checks.push(Check::new(
        "a temporary read token lists the tools",
        tools.await,
    ));
    checks
}

/// The `resource_metadata` URL of a 401's `WWW-Authenticate` challenge (RFC 9728), or of the
/// `x-amzn-Remapped-WWW-Authenticate` header API Gateway may rename it to (clients then find
/// the same document at its well-known URL; the challenge is still what the front sent).
pub(crate) fn resource_metadata(headers: &reqwest::header::HeaderMap) -> Option<String> {
    ["www-authenticate", "x-amzn-remapped-www-authenticate"]
        .into_iter()
        .find_map(|name| {
            let header = headers.get(name)?.to_str().ok()?;
            let rest = header.split("resource_metadata=\"").nth(1)?;
            rest.split('"').next().map(str::to_owned)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_metadata_is_read_from_the_challenge_or_api_gateways_remapped_one() {
        let challenge = r#"Bearer resource_metadata="https://n.example/.well-known/oauth-protected-resource/mcp""#;
        for name in ["WWW-Authenticate", "x-amzn-Remapped-WWW-Authenticate"] {
            let mut headers = reqwest::header::HeaderMap::new();
            headers.insert(
                reqwest::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                challenge.parse().unwrap(),
            );
            assert_eq!(
                resource_metadata(&headers).as_deref(),
                Some("https://n.example/.well-known/oauth-protected-resource/mcp"),
                "{name}"
            );
        }
        let mut other = reqwest::header::HeaderMap::new();
        other.insert("x-other", challenge.parse().unwrap());
        assert_eq!(resource_metadata(&other), None);
    }
}
