# The six functions (docs/design.md §3): one Rust binary each, built by `make lambdas` into
# target/lambda/<name>/bootstrap.zip. provided.al2023 on arm64 (Graviton): the binary is the
# runtime, the handler name is unused by it but must be "bootstrap".

resource "aws_cloudwatch_log_group" "fn" {
  #checkov:skip=CKV_AWS_338:Retention is var.log_retention_days (default 30): the lines hold request metadata (user ids, source IPs), kept only as long as debugging needs; a deployment that must keep a year sets 365.
  for_each          = local.functions
  name              = "/aws/lambda/${each.value.function_name}"
  retention_in_days = var.log_retention_days
  kms_key_id        = aws_kms_key.storage.arn
}

# The search model (`make embed-model`), shipped once beside the functions rather than inside
# each: `make lambdas` builds them to read it from the layer and packs it as
# target/lambda/embed-layer.zip. Every function that may embed text (search, writes, import,
# the account's deletes through the notebook) needs it; all six get it, as it costs nothing
# until read.
resource "aws_lambda_layer_version" "embed" {
  layer_name               = "${var.name_prefix}-embed-model"
  description              = "nib search model at /opt/nib/embed.nibm"
  filename                 = local.embed_layer_zip
  source_code_hash         = filebase64sha256(local.embed_layer_zip)
  compatible_runtimes      = ["provided.al2023"]
  compatible_architectures = ["arm64"]
}

resource "aws_lambda_function" "fn" {
  for_each = local.functions
  #checkov:skip=CKV_AWS_117:No VPC: the functions call only AWS APIs (DynamoDB, S3, KMS, Lambda) over TLS with IAM auth; a VPC would add NAT or endpoint costs and cold-start time and protect nothing here.
  #checkov:skip=CKV_AWS_272:No code signing: the zips are built from this repository by the operator's own `make lambdas` and uploaded by the same `terraform apply`; there is no third party in between to guard against.
  #checkov:skip=CKV_AWS_173:The environment holds no secret (resource names, key ARNs, URLs, a public key) and Lambda already encrypts it at rest; a customer key here would add a way for every function to fail at start and protect nothing.

  function_name = each.value.function_name
  description   = "nib ${each.key} (${var.name_prefix})"
  role          = aws_iam_role.fn[each.key].arn

  runtime          = "provided.al2023"
  architectures    = ["arm64"]
  handler          = "bootstrap"
  filename         = each.value.zip
  source_code_hash = filebase64sha256(each.value.zip)
  # The search model, at /opt/nib/embed.nibm (the binaries are built to read it there).
  layers = [aws_lambda_layer_version.embed.arn]

  memory_size                    = each.value.memory_mb
  timeout                        = each.value.timeout_seconds
  reserved_concurrent_executions = each.value.reserved_concurrency

  environment {
    variables = merge(local.common_environment, local.extra_environment[each.key])
  }

  tracing_config {
    mode = "Active"
  }

  dynamic "dead_letter_config" {
    for_each = each.key == "ingest" ? [aws_sqs_queue.ingest_dlq.arn] : []
    content {
      target_arn = dead_letter_config.value
    }
  }

  # The OCR settings hold together (one variable's validation cannot see another's before
  # Terraform 1.9): checked at plan, before anything changes.
  lifecycle {
    precondition {
      condition     = var.ocr_provider != "openai" || (var.ocr_openai_base_url != "" && var.ocr_openai_model != "")
      error_message = "ocr_provider = openai needs ocr_openai_base_url and ocr_openai_model."
    }
    precondition {
      condition     = var.ocr_provider != "google-vision" || var.ocr_api_key_secret_arn != ""
      error_message = "ocr_provider = google-vision needs ocr_api_key_secret_arn (the secret holding the Vision API key)."
    }
    precondition {
      condition     = var.ocr_provider != "textract" || var.ocr_api_key_secret_arn == ""
      error_message = "ocr_api_key_secret_arn is for a remote provider (ocr_provider = openai or google-vision); Textract takes no key."
    }
    precondition {
      condition     = var.ocr_api_key_secret_kms_key_arn == "" || var.ocr_api_key_secret_arn != ""
      error_message = "ocr_api_key_secret_kms_key_arn is the key of the secret ocr_api_key_secret_arn names; set that too."
    }
  }

  # The log group first (with its retention and key; otherwise Lambda would create one that
  # keeps logs forever), and the role's permissions before the function (Lambda checks the DLQ
  # permission at creation).
  depends_on = [
    aws_cloudwatch_log_group.fn,
    aws_iam_role_policy.base,
    aws_iam_role_policy.fn,
  ]
}

# ingest: S3 retries nothing itself; Lambda retries an asynchronous event twice, then the event
# goes to the DLQ, where an operator can see which upload failed and drop it in again.
resource "aws_sqs_queue" "ingest_dlq" {
  name                              = "${var.name_prefix}-ingest-dlq"
  message_retention_seconds         = 1209600
  kms_master_key_id                 = aws_kms_key.storage.arn
  kms_data_key_reuse_period_seconds = 3600
}

resource "aws_lambda_function_event_invoke_config" "ingest" {
  function_name                = aws_lambda_function.fn["ingest"].function_name
  maximum_retry_attempts       = 2
  maximum_event_age_in_seconds = 21600
}

# Who may invoke what, besides mcp's role (iam.tf): API Gateway the two HTTP functions, S3 the
# ingest function. Nothing may invoke pages or tasks but mcp's role: no permission names them.

resource "aws_lambda_permission" "api_mcp" {
  statement_id  = "AllowApiGateway"
  action        = "lambda:InvokeFunction"
  function_name = aws_lambda_function.fn["mcp"].function_name
  principal     = "apigateway.amazonaws.com"
  source_arn    = "${aws_apigatewayv2_api.http.execution_arn}/*"
}

resource "aws_lambda_permission" "api_oauth" {
  statement_id  = "AllowApiGateway"
  action        = "lambda:InvokeFunction"
  function_name = aws_lambda_function.fn["oauth"].function_name
  principal     = "apigateway.amazonaws.com"
  source_arn    = "${aws_apigatewayv2_api.http.execution_arn}/*"
}

resource "aws_lambda_permission" "s3_ingest" {
  statement_id   = "AllowS3Uploads"
  action         = "lambda:InvokeFunction"
  function_name  = aws_lambda_function.fn["ingest"].function_name
  principal      = "s3.amazonaws.com"
  source_arn     = aws_s3_bucket.pages.arn
  source_account = local.account_id
}
