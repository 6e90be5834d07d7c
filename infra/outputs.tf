output "connector_url" {
  description = "The MCP connector URL: add it in Claude, ChatGPT, MCP Inspector or any MCP client."
  value       = "${local.public_url}/mcp"
}

output "public_url" {
  description = "The base URL (NIB_PUBLIC_URL): OAuth issuer and home of the well-known documents."
  value       = local.public_url
}

output "api_endpoint" {
  description = "The API's execute-api endpoint (disabled when custom_domain is set)."
  value       = aws_apigatewayv2_api.http.api_endpoint
}

output "custom_domain_target" {
  description = "Where the custom domain's DNS record must point (CNAME or alias), when custom_domain is set."
  value       = var.custom_domain != "" ? aws_apigatewayv2_domain_name.custom[0].domain_name_configuration[0].target_domain_name : null
}

output "table_name" {
  description = "The DynamoDB table (NIB_TABLE)."
  value       = aws_dynamodb_table.main.name
}

output "bucket_name" {
  description = "The S3 bucket of page images and uploads (NIB_BUCKET). Drop files under uploads/{user}/ to import them."
  value       = aws_s3_bucket.pages.bucket
}

output "data_key_arn" {
  description = "The KMS key that wraps users' data keys (NIB_KMS_KEY_ID)."
  value       = aws_kms_key.data.arn
}

output "signing_key_arn" {
  description = "The KMS key that signs OAuth access tokens (NIB_SIGNING_KEY_ID)."
  value       = aws_kms_key.signing.arn
}

output "function_names" {
  description = "The Lambda functions by role: mcp, pages, tasks, ingest, oauth."
  value       = { for name, f in aws_lambda_function.fn : name => f.function_name }
}

output "ingest_dlq_url" {
  description = "Upload events that ingest failed on, after retries."
  value       = aws_sqs_queue.ingest_dlq.url
}

output "region" {
  description = "The region of every resource (AWS_REGION for `nib --backend aws`)."
  value       = local.region
}

output "operator_policy_arn" {
  description = "The IAM policy of nib's admin commands (--backend aws): attach it to the operator's role and list that role in operator_role_arns."
  value       = aws_iam_policy.operator.arn
}
