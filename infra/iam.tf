# One role per function, each with only what its code uses. The rules below are asserted by
# tests/infra/test_infra.py, so loosening one fails `make test-infra`:
#
# - Every DynamoDB statement carries a dynamodb:LeadingKeys condition naming the partition-key
#   prefixes (docs/design.md §5) that function may touch: mcp only tokens, rate windows, OAuth grants
#   and browser sessions (TOK#, RL#, GRANT#, SESSION#: a page view reads and refreshes its
#   session); oauth only CLIENT#, CODE#, RT#, GRANT#, USER# (sign-in accounts), SESSION#
#   (created at sign-in, read at /oauth/authorize, deleted at sign-out), the one item SECRET#oauth (its CSRF key's secret) and the counters of its own rate limits
#   (RL#login#, RL#oauth-register#, RL#oauth-addr#: sign-ins per user name, registrations,
#   everything per client address); the class functions only user partitions (U#); account
#   what a deletion removes: U#, USER#, TOK#, GRANT#, RT#, SESSION#, CLIENT# (approvals of
#   clients), and on the index only the user's credential partitions. It puts only in U# (the
#   data key's tombstones) and USER# (the deletion marker); elsewhere it gets and deletes.
#   No other role reaches SECRET#. No role may Scan (a Scan has no leading key, so the condition
#   would not hold it back). Each list is exactly the partitions the function's code reaches
#   (nib::functions::PARTITIONS, compared with this file by a Rust test).
# - The data key (users' data keys) is usable by pages, tasks and ingest only, for
#   GenerateDataKey and Decrypt only, and only under the {"user_id": ...} encryption context.
#   oauth may use it for its own server secret only, under {"nib_server_secret": "oauth"}, which
#   no user's key is wrapped with. mcp has no statement on it.
# - The storage key is usable by a role only through the service that encrypts with it
#   (kms:ViaService): a role can read an encrypted item or object, never decrypt on its own.
# - account lists object versions under u/, uploads/ and exports/ and deletes them, nothing
#   else of the bucket, and uses no KMS key of its own (deleting reads nothing sealed).
# - tasks and oauth have no S3 permission. pages may read page images (u/) and re-tag them by
#   copying them onto themselves (the trash), and write and read exports (exports/: the archive
#   export_notebook writes and hands out as a presigned GET, which S3 authorises as pages). ingest reads uploads/ and writes u/. mcp has
#   no S3 permission: it signs the web app's presigned POST uploads, which S3 authorises as
#   their signer, with credentials of the uploads role (aws_iam_role.uploads, below) that it
#   assumes for each upload with a session policy naming that upload's keys only
#   (uploads/{user}/* for the script's page files, uploads/{user}/form-{id}/* for the form
#   without script, the exact uploads/{user}/bundles/{id}.zip for a bundle). The uploads role
#   may only put objects under uploads/ (and encrypt them through S3); only mcp may assume it.
# - Only ingest may call Textract, and only textract:DetectDocumentText (the page goes in the
#   request, so Textract reads nothing of the bucket and needs no S3 permission), and only while
#   var.ocr_provider is textract.
# - Only ingest may read a secret: secretsmanager:GetSecretValue on exactly the one
#   var.ocr_api_key_secret_arn names (a remote OCR provider's key), and no statement when it is
#   unset; kms:Decrypt on var.ocr_api_key_secret_kms_key_arn only through Secrets Manager and
#   for that secret, when the operator names a key of their own.
# - Only mcp may invoke pages, tasks and account (no other role has lambda:InvokeFunction, and no
#   resource-based permission lets anything else in, API Gateway included).
# - Each role writes only to its own log group.

data "aws_iam_policy_document" "lambda_assume" {
  statement {
    effect  = "Allow"
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }
    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account_id]
    }
  }
}

resource "aws_iam_role" "fn" {
  for_each           = local.functions
  name               = "${each.value.function_name}-role"
  description        = "Execution role of the ${each.value.function_name} function"
  assume_role_policy = data.aws_iam_policy_document.lambda_assume.json
}

locals {
  table_arns      = [aws_dynamodb_table.main.arn]
  table_and_index = [aws_dynamodb_table.main.arn, "${aws_dynamodb_table.main.arn}/index/gsi1"]
  index_arns      = ["${aws_dynamodb_table.main.arn}/index/gsi1"]
  pages_objects   = "${aws_s3_bucket.pages.arn}/u/*"
  upload_objects  = "${aws_s3_bucket.pages.arn}/uploads/*"
  export_objects  = "${aws_s3_bucket.pages.arn}/exports/*"
}

# ---------------------------------------------------------------------------------------------
# What every function needs: its own log group, and X-Ray (tracing is on for all of them).

data "aws_iam_policy_document" "base" {
  for_each = local.functions

  statement {
    sid       = "OwnLogGroup"
    effect    = "Allow"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.fn[each.key].arn}:*"]
  }

  # X-Ray's write actions support no resource-level restriction.
  statement {
    sid       = "Tracing"
    effect    = "Allow"
    actions   = ["xray:PutTraceSegments", "xray:PutTelemetryRecords"]
    resources = ["*"]
  }
}

resource "aws_iam_role_policy" "base" {
  for_each = local.functions
  name     = "logs-and-tracing"
  role     = aws_iam_role.fn[each.key].id
  policy   = data.aws_iam_policy_document.base[each.key].json
}

# ---------------------------------------------------------------------------------------------
# mcp: the front. Tokens, rate windows, grant revocation checks and the browser sessions of
# page views; forwards tools/call; signs the web app's uploads.

data "aws_iam_policy_document" "mcp" {
  statement {
    sid    = "TokensRateWindowsGrants"
    effect = "Allow"
    # GetItem: the token, grant or session; PutItem: the token's last_used_at (a conditional
    # put, at most hourly) and a session's later idle expiry (conditional, at most every few
    # minutes); UpdateItem: the rate-window counters. No DeleteItem: sign-out is oauth's.
    actions = [
      "dynamodb:BatchGetItem",
      "dynamodb:GetItem",
      "dynamodb:PutItem",
      "dynamodb:UpdateItem",
    ]
    resources = local.table_arns
    condition {
      test     = "ForAllValues:StringLike"
      variable = "dynamodb:LeadingKeys"
      values   = ["TOK#*", "RL#*", "GRANT#*", "SESSION#*"]
    }
  }

  # The web app's connections screen lists the user's grants and tokens through their index
  # partitions (U#{user}#GRANTS, U#{user}#TOKENS: index keys of the GRANT# and TOK# items this
  # role already reaches). Query on the index only, and only those partitions: not the user's
  # notebook partitions (U#{user}, whose items are sealed with keys this role cannot open).
  statement {
    sid       = "ListOwnGrantsAndTokens"
    effect    = "Allow"
    actions   = ["dynamodb:Query"]
    resources = local.index_arns
    condition {
      test     = "ForAllValues:StringLike"
      variable = "dynamodb:LeadingKeys"
      values   = ["U#*#GRANTS", "U#*#TOKENS"]
    }
  }

  # DynamoDB decrypts the table for it.
  statement {
    sid       = "TableEncryptionThroughDynamoDB"
    effect    = "Allow"
    actions   = ["kms:Decrypt", "kms:DescribeKey", "kms:Encrypt", "kms:GenerateDataKey*"]
    resources = [aws_kms_key.storage.arn]
    condition {
      test     = "StringEquals"
      variable = "kms:ViaService"
      values   = ["dynamodb.${local.region}.amazonaws.com"]
    }
  }

  # The web app's uploads (`/app`): the browser posts a file straight to S3 with a presigned
  # POST, which S3 authorises as its signer. mcp signs each with a session of the uploads
  # role, assumed for it with a session policy of that upload's keys (S3Assets::sign_post), so
  # a form may put only its own keys, whatever its policy or a tampered field says.
  statement {
    sid       = "AssumeTheUploadsRole"
    effect    = "Allow"
    actions   = ["sts:AssumeRole"]
    resources = [aws_iam_role.uploads.arn]
  }

  statement {
    sid       = "ForwardToClassFunctions"
    effect    = "Allow"
    actions   = ["lambda:InvokeFunction"]
    resources = [local.function_arns.pages, local.function_arns.tasks, local.function_arns.account]
  }
}

# ---------------------------------------------------------------------------------------------
# pages: list_pages, get_page, search_pages, search, fetch, and the trash tools delete_page,
# restore_page, list_trash (their transactions put, delete, update and condition-check items
# of the user's partitions), export_notebook (an archive under exports/), plus the access
# record and a user's first data-key item.

data "aws_iam_policy_document" "pages" {
  statement {
    sid    = "UserPartitions"
    effect = "Allow"
    actions = [
      "dynamodb:BatchGetItem",
      "dynamodb:ConditionCheckItem",
      "dynamodb:DeleteItem",
      "dynamodb:GetItem",
      "dynamodb:PutItem",
      "dynamodb:Query",
      "dynamodb:UpdateItem",
    ]
    resources = local.table_and_index
    condition {
      test     = "ForAllValues:StringLike"
      variable = "dynamodb:LeadingKeys"
      values   = ["U#*"]
    }
  }

  statement {
    sid       = "UserDataKeys"
    effect    = "Allow"
    actions   = ["kms:GenerateDataKey", "kms:Decrypt"]
    resources = [aws_kms_key.data.arn]
    condition {
      test     = "ForAllValues:StringEquals"
      variable = "kms:EncryptionContextKeys"
      values   = ["user_id"]
    }
    condition {
      test     = "Null"
      variable = "kms:EncryptionContext:user_id"
      values   = ["false"]
    }
  }

  # Presigned GET URLs are signed with this role, so S3 checks this role's permission when the
  # client fetches the image.
  statement {
    sid       = "ReadPageImages"
    effect    = "Allow"
    actions   = ["s3:GetObject"]
    resources = [local.pages_objects]
  }

  # The trash marks a page's images by copying each onto itself with the tag nib-trash=1 (and
  # back without it): GetObjectTagging to see the mark, PutObjectTagging for the copy's tags,
  # and PutObject only as a copy of a page image (x-amz-copy-source in u/), so pages can
  # re-tag images but never write new bytes.
  statement {
    sid       = "MarkTrashedPageImages"
    effect    = "Allow"
    actions   = ["s3:GetObjectTagging", "s3:PutObjectTagging"]
    resources = [local.pages_objects]
  }

  statement {
    sid       = "CopyPageImagesOntoThemselves"
    effect    = "Allow"
    actions   = ["s3:PutObject"]
    resources = [local.pages_objects]
    condition {
      test     = "StringLike"
      variable = "s3:x-amz-copy-source"
      values   = ["${aws_s3_bucket.pages.bucket}/u/*"]
    }
  }

  # export_notebook puts the archive at exports/{user}/{random}.zip and hands out a presigned
  # GET of it (signed with this role, so S3 checks this role's GetObject when it is fetched).
  # Nothing else of the bucket is written this way; the lifecycle rule expire-exports deletes
  # them a day later.
  statement {
    sid       = "KeepExports"
    effect    = "Allow"
    actions   = ["s3:GetObject", "s3:PutObject"]
    resources = [local.export_objects]
  }

  statement {
    sid       = "StorageEncryptionThroughServices"
    effect    = "Allow"
    actions   = ["kms:Decrypt", "kms:DescribeKey", "kms:Encrypt", "kms:GenerateDataKey*"]
    resources = [aws_kms_key.storage.arn]
    condition {
      test     = "StringEquals"
      variable = "kms:ViaService"
      values   = ["dynamodb.${local.region}.amazonaws.com", "s3.${local.region}.amazonaws.com"]
    }
  }
}

# ---------------------------------------------------------------------------------------------
# tasks: list_tasks, create_task, update_task_status. DynamoDB and KMS; no S3 at all.

data "aws_iam_policy_document" "tasks" {
  statement {
    sid    = "UserPartitions"
    effect = "Allow"
    actions = [
      "dynamodb:BatchGetItem",
      "dynamodb:ConditionCheckItem",
      "dynamodb:DeleteItem",
      "dynamodb:GetItem",
      "dynamodb:PutItem",
      "dynamodb:Query",
      "dynamodb:UpdateItem",
    ]
    resources = local.table_and_index
    condition {
      test     = "ForAllValues:StringLike"
      variable = "dynamodb:LeadingKeys"
      values   = ["U#*"]
    }
  }

  statement {
    sid       = "UserDataKeys"
    effect    = "Allow"
    actions   = ["kms:GenerateDataKey", "kms:Decrypt"]
    resources = [aws_kms_key.data.arn]
    condition {
      test     = "ForAllValues:StringEquals"
      variable = "kms:EncryptionContextKeys"
      values   = ["user_id"]
    }
    condition {
      test     = "Null"
      variable = "kms:EncryptionContext:user_id"
      values   = ["false"]
    }
  }

  statement {
    sid       = "TableEncryptionThroughDynamoDB"
    effect    = "Allow"
    actions   = ["kms:Decrypt", "kms:DescribeKey", "kms:Encrypt", "kms:GenerateDataKey*"]
    resources = [aws_kms_key.storage.arn]
    condition {
      test     = "StringEquals"
      variable = "kms:ViaService"
      values   = ["dynamodb.${local.region}.amazonaws.com"]
    }
  }
}

# ---------------------------------------------------------------------------------------------
# ingest: S3 ObjectCreated on uploads/ -> the import path: reads the upload, writes the page
# image under u/ and the page, its tasks and its postings to the table.

data "aws_iam_policy_document" "ingest" {
  statement {
    sid    = "UserPartitions"
    effect = "Allow"
    actions = [
      "dynamodb:BatchGetItem",
      "dynamodb:ConditionCheckItem",
      "dynamodb:DeleteItem",
      "dynamodb:GetItem",
      "dynamodb:PutItem",
      "dynamodb:Query",
      "dynamodb:UpdateItem",
    ]
    resources = local.table_and_index
    condition {
      test     = "ForAllValues:StringLike"
      variable = "dynamodb:LeadingKeys"
      values   = ["U#*"]
    }
  }

  statement {
    sid       = "UserDataKeys"
    effect    = "Allow"
    actions   = ["kms:GenerateDataKey", "kms:Decrypt"]
    resources = [aws_kms_key.data.arn]
    condition {
      test     = "ForAllValues:StringEquals"
      variable = "kms:EncryptionContextKeys"
      values   = ["user_id"]
    }
    condition {
      test     = "Null"
      variable = "kms:EncryptionContext:user_id"
      values   = ["false"]
    }
  }

  statement {
    sid       = "ReadUploads"
    effect    = "Allow"
    actions   = ["s3:GetObject"]
    resources = [local.upload_objects]
  }

  statement {
    sid       = "WritePageImages"
    effect    = "Allow"
    actions   = ["s3:PutObject"]
    resources = [local.pages_objects]
  }

  statement {
    sid       = "StorageEncryptionThroughServices"
    effect    = "Allow"
    actions   = ["kms:Decrypt", "kms:DescribeKey", "kms:Encrypt", "kms:GenerateDataKey*"]
    resources = [aws_kms_key.storage.arn]
    condition {
      test     = "StringEquals"
      variable = "kms:ViaService"
      values = [
        "dynamodb.${local.region}.amazonaws.com",
        "s3.${local.region}.amazonaws.com",
        "sqs.${local.region}.amazonaws.com",
      ]
    }
  }

  # Lambda sends events that failed every retry here, with this role.
  statement {
    sid       = "DeadLetters"
    effect    = "Allow"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.ingest_dlq.arn]
  }

  # Handwriting: one synchronous DetectDocumentText per page image, the image in the request
  # (never StartDocumentTextDetection, so no S3 read by Textract and no SNS topic).
  # DetectDocumentText supports no resource-level permission (there is no Textract resource it
  # acts on), so the resource can only be "*"; the action is the only one granted, and only
  # while Textract is the engine.
  dynamic "statement" {
    for_each = var.ocr_provider == "textract" ? ["textract"] : []
    content {
      sid       = "ReadHandwriting"
      effect    = "Allow"
      actions   = ["textract:DetectDocumentText"]
      resources = ["*"]
    }
  }

  # A remote OCR provider's key (var.ocr_api_key_secret_arn): one GetSecretValue at cold
  # start, on that secret alone, named by its full ARN. No statement without one.
  dynamic "statement" {
    for_each = var.ocr_api_key_secret_arn != "" ? ["secret"] : []
    content {
      sid       = "ReadOcrKey"
      effect    = "Allow"
      actions   = ["secretsmanager:GetSecretValue"]
      resources = [var.ocr_api_key_secret_arn]
    }
  }

  # A secret encrypted with the operator's own KMS key (Secrets Manager's aws/secretsmanager
  # key needs no grant): Decrypt, only as Secrets Manager does it for that one secret (its
  # encryption context names the secret's ARN).
  dynamic "statement" {
    for_each = var.ocr_api_key_secret_arn != "" && var.ocr_api_key_secret_kms_key_arn != "" ? ["kms"] : []
    content {
      sid       = "DecryptOcrKey"
      effect    = "Allow"
      actions   = ["kms:Decrypt"]
      resources = [var.ocr_api_key_secret_kms_key_arn]
      condition {
        test     = "StringEquals"
        variable = "kms:ViaService"
        values   = ["secretsmanager.${local.region}.amazonaws.com"]
      }
      condition {
        test     = "StringEquals"
        variable = "kms:EncryptionContext:SecretARN"
        values   = [var.ocr_api_key_secret_arn]
      }
    }
  }
}

# ---------------------------------------------------------------------------------------------
# oauth: metadata, registration, authorize (sign-in and consent), token, revoke. UpdateItem:
# the rate-limit counters of sign-ins, registrations and metadata fetches (they fail closed, so
# without it no one could sign in).

data "aws_iam_policy_document" "oauth" {
  statement {
    sid    = "OAuthItems"
    effect = "Allow"
    actions = [
      "dynamodb:BatchGetItem",
      "dynamodb:ConditionCheckItem",
      "dynamodb:DeleteItem",
      "dynamodb:GetItem",
      "dynamodb:PutItem",
      "dynamodb:Query",
      "dynamodb:UpdateItem",
    ]
    resources = local.table_arns
    condition {
      test     = "ForAllValues:StringLike"
      variable = "dynamodb:LeadingKeys"
      values = [
        "CLIENT#*", "CODE#*", "RT#*", "GRANT#*", "USER#*", "SESSION#*", "SECRET#oauth",
        "RL#login#*", "RL#oauth-register#*", "RL#oauth-addr#*",
      ]
    }
  }

  # "Sign out everywhere" (POST /oauth/signout with everywhere=1) finds the user's sessions
  # through their index partition U#{user}#SESSIONS. Query on the index only, only that.
  statement {
    sid       = "ListOwnSessions"
    effect    = "Allow"
    actions   = ["dynamodb:Query"]
    resources = local.index_arns
    condition {
      test     = "ForAllValues:StringLike"
      variable = "dynamodb:LeadingKeys"
      values   = ["U#*#SESSIONS"]
    }
  }

  # The consent form's CSRF key derives from the server secret SECRET#oauth, a 32-byte key
  # wrapped by the data key under the encryption context {"nib_server_secret": "oauth"}
  # (KmsKeys::server_secret): oauth unwraps it at cold start, and generates it on the table's
  # very first start. That context opens no user's data key (theirs is {"user_id": ...}).
  statement {
    sid       = "OAuthServerSecret"
    effect    = "Allow"
    actions   = ["kms:Decrypt", "kms:GenerateDataKey"]
    resources = [aws_kms_key.data.arn]
    condition {
      test     = "StringEquals"
      variable = "kms:EncryptionContext:nib_server_secret"
      values   = ["oauth"]
    }
    condition {
      test     = "ForAllValues:StringEquals"
      variable = "kms:EncryptionContextKeys"
      values   = ["nib_server_secret"]
    }
  }

  statement {
    sid       = "TableEncryptionThroughDynamoDB"
    effect    = "Allow"
    actions   = ["kms:Decrypt", "kms:DescribeKey", "kms:Encrypt", "kms:GenerateDataKey*"]
    resources = [aws_kms_key.storage.arn]
    condition {
      test     = "StringEquals"
      variable = "kms:ViaService"
      values   = ["dynamodb.${local.region}.amazonaws.com"]
    }
  }

  statement {
    sid       = "SignAccessTokens"
    effect    = "Allow"
    actions   = ["kms:Sign"]
    resources = [aws_kms_key.signing.arn]
    condition {
      test     = "StringEquals"
      variable = "kms:SigningAlgorithm"
      values   = ["ECDSA_SHA_256"]
    }
  }

  statement {
    sid       = "PublishPublicKey"
    effect    = "Allow"
    actions   = ["kms:GetPublicKey"]
    resources = [aws_kms_key.signing.arn]
  }
}

# ---------------------------------------------------------------------------------------------
# account: the web app's "delete my account" (Accounts::delete, as `nib user delete`), invoked
# by mcp only. Removes the user's items in every partition they live in, found by key or
# through the user's index partitions; destroys the data key by overwriting its wrapped copies
# (no KMS call); deletes every version of the user's objects.

data "aws_iam_policy_document" "account" {
  # Query: the user's partitions (U#{user}, its postings, USER#{user}); GetItem and
  # BatchGetItem: whether the user exists; DeleteItem (in transactions): everything a deletion
  # removes. No UpdateItem, no Scan.
  statement {
    sid    = "WhatADeletionRemoves"
    effect = "Allow"
    actions = [
      "dynamodb:BatchGetItem",
      "dynamodb:DeleteItem",
      "dynamodb:GetItem",
      "dynamodb:Query",
    ]
    resources = local.table_arns
    condition {
      test     = "ForAllValues:StringLike"
      variable = "dynamodb:LeadingKeys"
      values   = ["U#*", "USER#*", "TOK#*", "GRANT#*", "RT#*", "SESSION#*", "CLIENT#*"]
    }
  }

  # PutItem only where a deletion writes: the deletion marker (USER#{user}) and the data key's
  # tombstones (U#{user}). Tokens, grants, refresh tokens, sessions and clients are deleted,
  # never written (functions::ACCOUNT_PUT_PARTITIONS).
  statement {
    sid       = "MarkerAndTombstones"
    effect    = "Allow"
    actions   = ["dynamodb:PutItem"]
    resources = local.table_arns
    condition {
      test     = "ForAllValues:StringLike"
      variable = "dynamodb:LeadingKeys"
      values   = ["U#*", "USER#*"]
    }
  }

  # The credentials kept outside the user's partitions are found through the user's index
  # partitions (account::credential_partitions): Query on the index, only those.
  statement {
    sid       = "FindTheUsersCredentials"
    effect    = "Allow"
    actions   = ["dynamodb:Query"]
    resources = local.index_arns
    condition {
      test     = "ForAllValues:StringLike"
      variable = "dynamodb:LeadingKeys"
      values   = ["U#*#TOKENS", "U#*#GRANTS", "U#*#RT", "U#*#SESSIONS", "U#*#APPROVED"]
    }
  }

  statement {
    sid       = "DeleteUsersObjects"
    effect    = "Allow"
    actions   = ["s3:DeleteObject", "s3:DeleteObjectVersion"]
    resources = [local.pages_objects, local.upload_objects, local.export_objects]
  }

  statement {
    sid       = "ListUsersObjects"
    effect    = "Allow"
    actions   = ["s3:ListBucketVersions"]
    resources = [aws_s3_bucket.pages.arn]
    condition {
      test     = "StringLike"
      variable = "s3:prefix"
      values   = ["u/*", "uploads/*", "exports/*"]
    }
  }

  statement {
    sid       = "TableEncryptionThroughDynamoDB"
    effect    = "Allow"
    actions   = ["kms:Decrypt", "kms:DescribeKey", "kms:Encrypt", "kms:GenerateDataKey*"]
    resources = [aws_kms_key.storage.arn]
    condition {
      test     = "StringEquals"
      variable = "kms:ViaService"
      values   = ["dynamodb.${local.region}.amazonaws.com"]
    }
  }
}

# ---------------------------------------------------------------------------------------------
# uploads: what the web app's presigned POSTs are signed as. Only mcp may assume it, and mcp
# does so for each upload with a session policy naming that upload's keys
# (presigned_post::upload_session_policy), so a session may do less than this, never more.
# The sessions last 15 minutes (STS's shortest; a form's policy expires sooner).

data "aws_iam_policy_document" "uploads_assume" {
  statement {
    effect  = "Allow"
    actions = ["sts:AssumeRole"]
    principals {
      type        = "AWS"
      identifiers = [aws_iam_role.fn["mcp"].arn]
    }
  }
}

resource "aws_iam_role" "uploads" {
  name                 = "${var.name_prefix}-uploads-role"
  description          = "Signs the web app's uploads; assumed by mcp per upload, narrowed to its keys"
  assume_role_policy   = data.aws_iam_policy_document.uploads_assume.json
  max_session_duration = 3600
}

data "aws_iam_policy_document" "uploads" {
  statement {
    sid       = "PutUploads"
    effect    = "Allow"
    actions   = ["s3:PutObject"]
    resources = [local.upload_objects]
  }

  # S3 encrypts each upload with the bucket's default key (SSE-KMS), which needs the
  # uploader's kms:GenerateDataKey through S3.
  statement {
    sid       = "EncryptUploadsThroughS3"
    effect    = "Allow"
    actions   = ["kms:Encrypt", "kms:GenerateDataKey*"]
    resources = [aws_kms_key.storage.arn]
    condition {
      test     = "StringEquals"
      variable = "kms:ViaService"
      values   = ["s3.${local.region}.amazonaws.com"]
    }
  }
}

resource "aws_iam_role_policy" "uploads" {
  name   = "${var.name_prefix}-uploads-access"
  role   = aws_iam_role.uploads.id
  policy = data.aws_iam_policy_document.uploads.json
}

locals {
  function_policies = {
    mcp     = data.aws_iam_policy_document.mcp.json
    pages   = data.aws_iam_policy_document.pages.json
    tasks   = data.aws_iam_policy_document.tasks.json
    ingest  = data.aws_iam_policy_document.ingest.json
    oauth   = data.aws_iam_policy_document.oauth.json
    account = data.aws_iam_policy_document.account.json
  }
}

resource "aws_iam_role_policy" "fn" {
  for_each = local.function_policies
  name     = "${local.functions[each.key].function_name}-access"
  role     = aws_iam_role.fn[each.key].id
  policy   = each.value
}
