//! The `oauth` function (docs/design.md §3): the well-known metadata documents, client registration,
//! the consent page, token and revocation, behind API Gateway's `/oauth/*` and `/.well-known/*`
//! routes. Wiring only: see `nib::functions::oauth`. The one thing done here is handing the
//! router API Gateway's `sourceIp` as [`nib::http::ClientAddr`] (the per-address limits of the
//! sign-in page), since only this crate knows lambda_http's request context.

use lambda_http::request::RequestContext;
use lambda_http::tower::ServiceExt;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    let router = nib::functions::oauth_from_env().await?;
    lambda_http::run(router.map_request(with_client_addr)).await
}

/// The request with API Gateway's `sourceIp` (the TCP peer API Gateway saw; not a header the
/// client wrote) as the router's `ClientAddr`.
fn with_client_addr(mut request: lambda_http::Request) -> lambda_http::Request {
    let source_ip = match request.extensions().get::<RequestContext>() {
        Some(RequestContext::ApiGatewayV2(context)) => context.http.source_ip.clone(),
        #[allow(unreachable_patterns)]
        _ => None,
    };
    if let Some(ip) = source_ip.and_then(|ip| ip.parse().ok()) {
        request.extensions_mut().insert(nib::http::ClientAddr(ip));
    }
    request
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An API Gateway v2 event as lambda_http hands it over: its `sourceIp` becomes the
    /// `ClientAddr`, whatever `X-Forwarded-For` says.
    #[test]
    fn the_source_ip_becomes_the_client_address() {
        let event = include_str!("../../../tests/data/lambda/apigw-v2-well-known.json")
            .replace(
                r#""x-forwarded-for": "203.0.113.7""#,
                r#""x-forwarded-for": "10.9.9.9""#,
            )
            .replace(
                r#""sourceIp": "203.0.113.7""#,
                r#""sourceIp": "198.51.100.23""#,
            );
        assert!(event.contains("10.9.9.9") && event.contains("198.51.100.23"));
        let request = lambda_http::request::from_str(&event).unwrap();
        let request = with_client_addr(request);
        assert_eq!(
            request.extensions().get::<nib::http::ClientAddr>(),
            Some(&nib::http::ClientAddr("198.51.100.23".parse().unwrap()))
        );
    }
}
