# Names and per-function settings, in one place.

locals {
  account_id = data.aws_caller_identity.current.account_id
  partition  = data.aws_partition.current.partition
  region     = data.aws_region.current.name

  table_name  = var.name_prefix
  bucket_name = "${var.name_prefix}-pages-${local.account_id}-${local.region}"

  # The connector's base URL (NIB_PUBLIC_URL): the OAuth issuer and the MCP resource is
  # "${local.public_url}/mcp". With a custom domain the execute-api endpoint is disabled.
  public_url = var.custom_domain != "" ? "https://${var.custom_domain}" : aws_apigatewayv2_api.http.api_endpoint

  # Defaults per function; var.memory_mb, var.timeout_seconds and var.reserved_concurrency
  # override them one function at a time.
  #   mcp:    the front (auth, rate limits, lifecycle, forwarding); waits for a class function.
  #   pages:  reads, decrypts and ranks (search reads every posting of each term).
  #   tasks:  small reads and transactions.
  #   ingest: S3 events on uploads/; reads handwriting (Textract by default, one synchronous
  #           call per page, ~1-2 s each; or var.ocr_provider's), parses and indexes. Asynchronous, so slow is fine: Lambda's
  #           15-minute maximum fits a 100-page notebook; the memory holds a rendered PDF page
  #           and its PNG (a few MB each) with room, and buys CPU for rendering and encoding.
  #   oauth:  argon2 password hashing on sign-in wants memory (and the CPU that comes with it).
  #   account: the web app's "delete my account", invoked by mcp only. Small requests, many of
  #           them for a large notebook: its timeout outlasts mcp's wait, so a deletion the
  #           front stopped waiting for still finishes (and a re-run, or `nib user delete`,
  #           finishes one that failed).
  default_settings = {
    mcp     = { memory_mb = 256, timeout_seconds = 29, reserved_concurrency = 10 }
    pages   = { memory_mb = 512, timeout_seconds = 25, reserved_concurrency = 10 }
    tasks   = { memory_mb = 256, timeout_seconds = 25, reserved_concurrency = 5 }
    ingest  = { memory_mb = 1536, timeout_seconds = 900, reserved_concurrency = 2 }
    oauth   = { memory_mb = 512, timeout_seconds = 15, reserved_concurrency = 5 }
    account = { memory_mb = 256, timeout_seconds = 300, reserved_concurrency = 2 }
  }

  embed_layer_zip = "${path.module}/${var.lambda_artifacts_dir}/embed-layer.zip"

  functions = {
    for name, d in local.default_settings : name => {
      function_name        = "${var.name_prefix}-${name}"
      memory_mb            = lookup(var.memory_mb, name, d.memory_mb)
      timeout_seconds      = lookup(var.timeout_seconds, name, d.timeout_seconds)
      reserved_concurrency = lookup(var.reserved_concurrency, name, d.reserved_concurrency)
      zip                  = "${path.module}/${var.lambda_artifacts_dir}/${name}/bootstrap.zip"
    }
  }

  # Built from the names rather than read from the functions, so the roles' policies (which
  # name them) can be in place before the functions are created.
  function_arns = {
    for name, f in local.functions :
    name => "arn:${local.partition}:lambda:${local.region}:${local.account_id}:function:${f.function_name}"
  }

  # Every function gets the same base configuration (the Rust config reads it once at cold
  # start). Naming a resource is not access to it: each role's policy in iam.tf decides that,
  # e.g. tasks sees NIB_BUCKET but has no S3 permission, and mcp sees NIB_KMS_KEY_ID but cannot
  # use the key. RUST_LOG (var.log_level) filters the functions' own lines; whatever it says, the
  # code keeps rmcp at error and the crates that log request/response bodies or raw events
  # (aws_smithy, aws_sigv4, lambda_runtime, hyper, ...) at info (shared/src/telemetry.rs).
  common_environment = {
    NIB_TABLE             = aws_dynamodb_table.main.name
    NIB_BUCKET            = aws_s3_bucket.pages.bucket
    NIB_KMS_KEY_ID        = aws_kms_key.data.arn
    NIB_ASSET_TTL_SECONDS = tostring(var.asset_ttl_seconds)
    NIB_PUBLIC_URL        = local.public_url
    RUST_LOG              = var.log_level
    NIB_LOG_FORMAT        = "json"
  }

  # The OCR engine for page images and PDFs (var.ocr_provider; nib-shared's `textract`
  # feature, which brings the remote providers too, is built into ingest only), and a remote
  # provider's settings. Its key is not among them: the variable names the secret that holds
  # it, which ingest reads at cold start (iam.tf, ReadOcrKey). Empty values are left out.
  ocr_environment = {
    NIB_OCR                       = var.ocr_provider
    NIB_OCR_OPENAI_BASE_URL       = var.ocr_provider == "openai" ? var.ocr_openai_base_url : ""
    NIB_OCR_OPENAI_MODEL          = var.ocr_provider == "openai" ? var.ocr_openai_model : ""
    NIB_OCR_OPENAI_API_KEY_SECRET = var.ocr_provider == "openai" ? var.ocr_api_key_secret_arn : ""
    NIB_OCR_GOOGLE_API_KEY_SECRET = var.ocr_provider == "google-vision" ? var.ocr_api_key_secret_arn : ""
  }

  # What only some functions need. The JWT verification key is passed to mcp as configuration
  # (the PEM of the KMS signing key's public half), so mcp verifies tokens offline and needs no
  # KMS permission at all; oauth signs with the key NIB_SIGNING_KEY_ID names (kms:Sign) and,
  # given the PEM, asks KMS for nothing at cold start. The JWT `kid` is a hash of the public key.
  extra_environment = {
    mcp = {
      NIB_PAGES_FUNCTION     = local.functions.pages.function_name
      NIB_TASKS_FUNCTION     = local.functions.tasks.function_name
      NIB_ACCOUNT_FUNCTION   = local.functions.account.function_name
      NIB_SIGNING_KEY_ID     = aws_kms_key.signing.arn
      NIB_SIGNING_PUBLIC_KEY = data.aws_kms_public_key.signing.public_key_pem
      NIB_UPLOAD_ROLE_ARN    = aws_iam_role.uploads.arn
    }
    pages  = {}
    tasks  = {}
    ingest = { for name, value in local.ocr_environment : name => value if value != "" }
    oauth = {
      NIB_SIGNING_KEY_ID     = aws_kms_key.signing.arn
      NIB_SIGNING_PUBLIC_KEY = data.aws_kms_public_key.signing.public_key_pem
    }
    account = {}
  }
}
