# Page images (u/{user}/pages/{page_id}.{pdf|png}), uploads (uploads/{user}/...), docs/design.md §7, and
# exports (exports/{user}/{random}.zip, export_notebook).
# Never public: clients get presigned GET URLs from pages. Encrypted with the storage key
# (a bucket key keeps the KMS calls few), TLS only, versioned.

resource "aws_s3_bucket" "pages" {
  #checkov:skip=CKV_AWS_18:Server access logs would need a second bucket for a single-user notebook; every object read is a presigned URL from a get_page call, which the API access log already records; CloudTrail data events can be turned on when an audit trail of object reads is wanted.
  #checkov:skip=CKV_AWS_144:No cross-region replication: versioning and PITR cover mistakes; a second region doubles cost and needs the keys replicated too (multi-region keys), which a personal deployment does not warrant.
  bucket = local.bucket_name
}

resource "aws_s3_bucket_public_access_block" "pages" {
  bucket                  = aws_s3_bucket.pages.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_ownership_controls" "pages" {
  bucket = aws_s3_bucket.pages.id
  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

resource "aws_s3_bucket_server_side_encryption_configuration" "pages" {
  bucket = aws_s3_bucket.pages.id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm     = "aws:kms"
      kms_master_key_id = aws_kms_key.storage.arn
    }
    bucket_key_enabled = true
  }
}

resource "aws_s3_bucket_versioning" "pages" {
  bucket = aws_s3_bucket.pages.id
  versioning_configuration {
    status = "Enabled"
  }
}

resource "aws_s3_bucket_lifecycle_configuration" "pages" {
  bucket = aws_s3_bucket.pages.id

  # Uploads are inputs: ingest copies each to u/ within seconds; what is left is a failure
  # (see the ingest DLQ) or garbage.
  rule {
    id     = "expire-uploads"
    status = "Enabled"
    filter {
      prefix = "uploads/"
    }
    expiration {
      days = var.upload_expiry_days
    }
    noncurrent_version_expiration {
      noncurrent_days = 1
    }
  }

  # Exports: export_notebook writes the whole notebook here (exports/{user}/{random}.zip) and
  # hands out a 15-minute presigned GET; the archive is gone a day later, its noncurrent
  # version (the bucket is versioned) a day after that.
  rule {
    id     = "expire-exports"
    status = "Enabled"
    filter {
      prefix = "exports/"
    }
    expiration {
      days = 1
    }
    noncurrent_version_expiration {
      noncurrent_days = 1
    }
  }

  # Trash: delete_page copies a page's images onto themselves tagged nib-trash=1 (a new current
  # version, so the days count from the delete); restore_page copies them back untagged. 31 days
  # = the trash's 30 (TRASH_DAYS) + 1, so the images outlive the restorable page
  # (ASSET_PURGE_DAYS). The version that was current before the delete is noncurrent from then
  # and goes with expire-old-versions (noncurrent_version_expiry_days); a tagged version that is
  # no longer current (restored, or expired here) goes a day later, so no copy of a purged
  # page's images outlives max(31 + 1, noncurrent_version_expiry_days) days after the delete.
  rule {
    id     = "purge-trashed-images"
    status = "Enabled"
    filter {
      tag {
        key   = "nib-trash"
        value = "1"
      }
    }
    expiration {
      days = 31
    }
    noncurrent_version_expiration {
      noncurrent_days = 1
    }
  }

  rule {
    id     = "expire-old-versions"
    status = "Enabled"
    filter {}
    noncurrent_version_expiration {
      noncurrent_days = var.noncurrent_version_expiry_days
    }
    expiration {
      expired_object_delete_marker = true
    }
    abort_incomplete_multipart_upload {
      days_after_initiation = 1
    }
  }

  depends_on = [aws_s3_bucket_versioning.pages]
}

data "aws_iam_policy_document" "pages_bucket" {
  statement {
    sid       = "DenyInsecureTransport"
    effect    = "Deny"
    actions   = ["s3:*"]
    resources = [aws_s3_bucket.pages.arn, "${aws_s3_bucket.pages.arn}/*"]
    principals {
      type        = "*"
      identifiers = ["*"]
    }
    condition {
      test     = "Bool"
      variable = "aws:SecureTransport"
      values   = ["false"]
    }
  }
}

resource "aws_s3_bucket_policy" "pages" {
  bucket = aws_s3_bucket.pages.id
  policy = data.aws_iam_policy_document.pages_bucket.json

  # A bucket policy put before the public access block could be judged public and refused.
  depends_on = [aws_s3_bucket_public_access_block.pages]
}

# A new upload starts the import.
resource "aws_s3_bucket_notification" "pages" {
  bucket = aws_s3_bucket.pages.id

  lambda_function {
    lambda_function_arn = aws_lambda_function.fn["ingest"].arn
    events              = ["s3:ObjectCreated:*"]
    filter_prefix       = "uploads/"
  }

  depends_on = [aws_lambda_permission.s3_ingest]
}

# The web app's upload page (shared/src/http/app/upload.rs) posts each file from the browser
# straight to the bucket with a presigned POST and reads the answer (for its progress bar and
# result), a cross-origin request from the connector's origin: allowed for POST from there
# only. Everything else stays same-origin (presigned GETs are plain navigations and images).
resource "aws_s3_bucket_cors_configuration" "pages" {
  bucket = aws_s3_bucket.pages.id

  cors_rule {
    allowed_methods = ["POST"]
    allowed_origins = [local.public_url]
    allowed_headers = ["*"]
    max_age_seconds = 3000
  }
}
