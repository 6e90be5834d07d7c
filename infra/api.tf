# The HTTP API: /mcp to the mcp front; the well-known documents and the OAuth endpoints to oauth
# (docs/design.md §3). Lambda proxy integrations, payload format 2.0. No API Gateway authorizer: the
# functions authenticate themselves, because the 401 must carry nib's WWW-Authenticate
# challenge (resource_metadata, scope) and accept both JWTs and nib_live_ tokens, which a JWT
# authorizer cannot do.

locals {
  # Route key => the function that answers it.
  routes = {
    "POST /mcp"   = "mcp"
    "GET /mcp"    = "mcp"
    "DELETE /mcp" = "mcp"
    # A page's stable link (the `url` of search/fetch): the front shows it to its signed-in
    # owner, reading it through the pages function like a get_page call.
    "GET /pages/{proxy+}" = "mcp"
    # The owner's web app (shared/src/http/app): the front serves its screens and forms, reading
    # and writing through the pages and tasks functions like a tool call.
    "GET /app"           = "mcp"
    "GET /app/{proxy+}"  = "mcp"
    "POST /app/{proxy+}" = "mcp"

    # RFC 9728 protected resource metadata, root and /mcp path forms (the fallback for clients
    # whose 401 lost its WWW-Authenticate header on the way through API Gateway).
    "GET /.well-known/oauth-protected-resource"     = "oauth"
    "GET /.well-known/oauth-protected-resource/mcp" = "oauth"
    # RFC 8414 authorization server metadata and the OpenID discovery path some clients try.
    "GET /.well-known/oauth-authorization-server" = "oauth"
    "GET /.well-known/openid-configuration"       = "oauth"
    # Registration, authorize (GET shows the page, POST submits it), token, revoke, JWKS: every
    # path under /oauth/ belongs to the oauth function, which names them in its metadata.
    "GET /oauth/{proxy+}"  = "oauth"
    "POST /oauth/{proxy+}" = "oauth"
  }
}

resource "aws_apigatewayv2_api" "http" {
  name          = var.name_prefix
  description   = "nib MCP connector"
  protocol_type = "HTTP"

  # With a custom domain, the connector has exactly one URL: tokens carry it as their audience.
  disable_execute_api_endpoint = var.custom_domain != ""
}

resource "aws_apigatewayv2_integration" "fn" {
  for_each               = toset(["mcp", "oauth"])
  api_id                 = aws_apigatewayv2_api.http.id
  integration_type       = "AWS_PROXY"
  integration_uri        = aws_lambda_function.fn[each.key].invoke_arn
  payload_format_version = "2.0"
  timeout_milliseconds   = 30000
}

resource "aws_apigatewayv2_route" "fn" {
  #checkov:skip=CKV_AWS_309:Authorization NONE on purpose: the functions authenticate every request (see the comment at the top of api.tf); the well-known documents, registration, authorize and token endpoints must be reachable without a token by the OAuth specs.
  for_each  = local.routes
  api_id    = aws_apigatewayv2_api.http.id
  route_key = each.key
  target    = "integrations/${aws_apigatewayv2_integration.fn[each.value].id}"
}

resource "aws_cloudwatch_log_group" "api" {
  #checkov:skip=CKV_AWS_338:Retention is var.log_retention_days (default 30): the lines hold request metadata (user ids, source IPs), kept only as long as debugging needs; a deployment that must keep a year sets 365.
  name              = "/aws/apigateway/${var.name_prefix}-http"
  retention_in_days = var.log_retention_days
  kms_key_id        = aws_kms_key.storage.arn
}

resource "aws_apigatewayv2_stage" "default" {
  api_id      = aws_apigatewayv2_api.http.id
  name        = "$default"
  auto_deploy = true

  default_route_settings {
    throttling_burst_limit   = var.throttling_burst_limit
    throttling_rate_limit    = var.throttling_rate_limit
    detailed_metrics_enabled = true
  }

  # One JSON line per request: ids, route, status, timings. Never a header or a body (the
  # Authorization header would be a credential).
  access_log_settings {
    destination_arn = aws_cloudwatch_log_group.api.arn
    format = jsonencode({
      requestId          = "$context.requestId"
      requestTime        = "$context.requestTime"
      sourceIp           = "$context.identity.sourceIp"
      userAgent          = "$context.identity.userAgent"
      routeKey           = "$context.routeKey"
      status             = "$context.status"
      protocol           = "$context.protocol"
      responseLength     = "$context.responseLength"
      responseLatency    = "$context.responseLatency"
      integrationStatus  = "$context.integrationStatus"
      integrationLatency = "$context.integrationLatency"
      integrationError   = "$context.integrationErrorMessage"
    })
  }
}

# Optional custom domain (custom_domain + certificate_arn). Point a DNS record at
# the output custom_domain_target.
resource "aws_apigatewayv2_domain_name" "custom" {
  count       = var.custom_domain != "" ? 1 : 0
  domain_name = var.custom_domain

  domain_name_configuration {
    certificate_arn = var.certificate_arn
    endpoint_type   = "REGIONAL"
    security_policy = "TLS_1_2"
  }

  lifecycle {
    precondition {
      condition     = var.certificate_arn != ""
      error_message = "custom_domain needs certificate_arn (an ACM certificate for that name in var.region)."
    }
  }
}

resource "aws_apigatewayv2_api_mapping" "custom" {
  count       = var.custom_domain != "" ? 1 : 0
  api_id      = aws_apigatewayv2_api.http.id
  domain_name = aws_apigatewayv2_domain_name.custom[0].id
  stage       = aws_apigatewayv2_stage.default.id
}
