# Inputs. Every variable has a default, so `terraform apply` works as it is; a
# terraform.tfvars file (ignored by git) overrides what a deployment needs, e.g.
#
#   region           = "eu-central-1"
#   custom_domain    = "nib.example.com"
#   certificate_arn  = "arn:aws:acm:eu-central-1:123456789012:certificate/..."
#   memory_mb        = { ingest = 2048 }

variable "region" {
  description = "AWS region of every resource."
  type        = string
  default     = "eu-west-1"
}

variable "name_prefix" {
  description = "Prefix of every resource name (functions, table, roles, keys' aliases). The bucket name adds the account id and region, since bucket names are global."
  type        = string
  default     = "nib"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{1,30}$", var.name_prefix))
    error_message = "name_prefix must be 2-31 characters of lowercase letters, digits and '-', starting with a letter."
  }
}

variable "custom_domain" {
  description = "Optional domain name for the API (e.g. nib.example.com). Empty: use the execute-api endpoint. When set, the execute-api endpoint is disabled, so tokens are only ever issued for one audience, and a DNS record (CNAME or alias) must point the domain at the output custom_domain_target."
  type        = string
  default     = ""
}

variable "certificate_arn" {
  description = "ARN of an ACM certificate for custom_domain, in the same region as the API. Required when custom_domain is set."
  type        = string
  default     = ""

  validation {
    condition     = var.certificate_arn == "" || can(regex("^arn:aws[a-z-]*:acm:", var.certificate_arn))
    error_message = "certificate_arn must be an ACM certificate ARN."
  }
}

variable "asset_ttl_seconds" {
  description = "Lifetime of the presigned page-image URLs that get_page returns (NIB_ASSET_TTL_SECONDS)."
  type        = number
  default     = 3600

  validation {
    condition     = var.asset_ttl_seconds >= 1 && var.asset_ttl_seconds <= 604800
    error_message = "asset_ttl_seconds must be between 1 and 604800 (S3's limit for presigned URLs)."
  }
}

variable "log_retention_days" {
  description = "Retention of the functions' and the API's log groups, in days (one of CloudWatch's allowed values)."
  type        = number
  default     = 30

  validation {
    condition     = contains([1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653], var.log_retention_days)
    error_message = "log_retention_days must be one of CloudWatch Logs' retention values."
  }
}

variable "log_level" {
  description = "RUST_LOG of every function."
  type        = string
  default     = "info"
}

variable "upload_expiry_days" {
  description = "Objects under uploads/ are deleted this many days after upload (ingest has copied them to u/ by then)."
  type        = number
  default     = 7
}

variable "noncurrent_version_expiry_days" {
  description = "Overwritten or deleted page images stay recoverable (versioning) this many days."
  type        = number
  default     = 30
}

variable "memory_mb" {
  description = "Memory per function in MB; only the functions named are changed (defaults in locals.tf). CPU grows with memory."
  type        = map(number)
  default     = {}
}

variable "timeout_seconds" {
  description = "Timeout per function in seconds; only the functions named are changed (defaults in locals.tf). API Gateway gives up after 30 s, so mcp stays below that and the class functions below mcp."
  type        = map(number)
  default     = {}
}

variable "reserved_concurrency" {
  description = "Reserved concurrent executions per function; only the functions named are changed (defaults in locals.tf). -1 reserves nothing (needed on accounts whose concurrency quota is still 10)."
  type        = map(number)
  default     = {}
}

variable "throttling_burst_limit" {
  description = "API Gateway stage burst limit (requests), for every route."
  type        = number
  default     = 50
}

variable "throttling_rate_limit" {
  description = "API Gateway stage steady-state limit (requests per second), for every route. Per-token limits are nib's own (rate windows in DynamoDB); this one protects the account."
  type        = number
  default     = 20
}

variable "data_key_user_arns" {
  description = "Extra IAM principals (e.g. an operator role running `nib import --backend aws`) allowed to generate and unwrap users' data keys, always under the user_id encryption context. Empty by default: only the class functions can."
  type        = list(string)
  default     = []
}

variable "operator_role_arns" {
  description = "The operator's roles (or users): those that run nib's admin commands with --backend aws and carry the operator policy (output operator_policy_arn). The data key's policy admits them, under the user_id encryption context only; empty (the default), it admits no operator."
  type        = list(string)
  default     = []
}

# Handwriting (issue 46): which engine the ingest function reads ink with, and for a remote
# provider the operator brings, where its key is. The key itself never passes through
# Terraform: it is in a Secrets Manager secret the operator creates, which only the ingest role
# may read (iam.tf, ReadOcrKey), so neither the function's configuration nor Terraform's state
# holds it.

variable "ocr_provider" {
  description = "The engine the ingest function reads handwritten pages with (NIB_OCR): textract (Amazon Textract), openai (an OpenAI-compatible chat-completions endpoint that takes images: ocr_openai_base_url, ocr_openai_model) or google-vision (Google Cloud Vision; needs ocr_api_key_secret_arn)."
  type        = string
  default     = "textract"

  validation {
    condition     = contains(["textract", "openai", "google-vision"], var.ocr_provider)
    error_message = "ocr_provider must be textract, openai or google-vision."
  }
}

variable "ocr_api_key_secret_arn" {
  description = "The full ARN (with its six-character suffix) of the AWS Secrets Manager secret whose SecretString is the remote OCR provider's API key. ingest reads it once at cold start (NIB_OCR_OPENAI_API_KEY_SECRET or NIB_OCR_GOOGLE_API_KEY_SECRET) and its role may read that secret alone. Empty: no key (an OpenAI-compatible server that needs none)."
  type        = string
  default     = ""

  validation {
    condition     = var.ocr_api_key_secret_arn == "" || can(regex("^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:.+-[A-Za-z0-9]{6}$", var.ocr_api_key_secret_arn))
    error_message = "ocr_api_key_secret_arn must be a Secrets Manager secret's full ARN, ending in the six characters Secrets Manager adds to the name (IAM matches the whole ARN)."
  }
}

variable "ocr_api_key_secret_kms_key_arn" {
  description = "The customer managed KMS key that encrypts that secret, when it is not Secrets Manager's own (aws/secretsmanager, which needs no permission): ingest may then decrypt with it through Secrets Manager, for that secret only. Empty by default."
  type        = string
  default     = ""

  validation {
    condition     = var.ocr_api_key_secret_kms_key_arn == "" || can(regex("^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/", var.ocr_api_key_secret_kms_key_arn))
    error_message = "ocr_api_key_secret_kms_key_arn must be a KMS key ARN (arn:...:kms:REGION:ACCOUNT:key/ID)."
  }
}

variable "ocr_openai_base_url" {
  description = "ocr_provider = openai: the API's base URL (NIB_OCR_OPENAI_BASE_URL; /chat/completions is added), e.g. https://api.openai.com/v1."
  type        = string
  default     = ""
}

variable "ocr_openai_model" {
  description = "ocr_provider = openai: a model that reads images (NIB_OCR_OPENAI_MODEL), e.g. gpt-4o-mini."
  type        = string
  default     = ""
}

variable "lambda_artifacts_dir" {
  description = "Folder holding <function>/bootstrap.zip, as `cargo lambda build --release --arm64 --output-format zip` leaves them."
  type        = string
  default     = "../target/lambda"
}
