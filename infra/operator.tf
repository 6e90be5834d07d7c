# The operator: whoever runs the admin commands of `nib --backend aws` (or `--from-terraform`)
# against this deployment, e.g. `make deploy`'s `nib user ensure-owner`, `nib token create`,
# `nib import`, `nib doctor`. The policy grants exactly what those commands use; attach it to
# the operator's role (or user) yourself, and list that role in operator_role_arns, without
# which the data key's policy admits nobody but the class functions (kms.tf).
#
# - The table: users' partitions (U#: pages, tasks, data keys, profiles, the access record that
#   `nib access list` reads), the user index
#   (USERS, the gsi1 partition `nib user list` reads), API tokens (TOK#), the OAuth records the
#   admin commands list, revoke and, for `nib user delete`, remove (CLIENT#, GRANT#, RT#, USER#),
#   browser sessions (SESSION#: `nib user passwd` and `nib user delete` end a user's sessions),
#   and nothing else: no SECRET# (the commands load no server secret), no Scan. Describe calls
#   for `nib doctor`.
# - The bucket: page images (u/) and uploads (uploads/, `nib import --via-upload`), plus the
#   bucket settings `nib doctor` reads; listing versions only under u/ and uploads/ and
#   deleting them (`nib user delete` removes a user's objects with every version).
# - The data key: GenerateDataKey and Decrypt under the {"user_id": ...} context only.
# - The storage key only through DynamoDB and S3.

data "aws_iam_policy_document" "operator" {
  statement {
    sid    = "OperatorPartitions"
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
      values   = ["U#*", "USERS", "TOK#*", "CLIENT#*", "GRANT#*", "RT#*", "USER#*", "SESSION#*"]
    }
  }

  statement {
    sid       = "DescribeTable"
    effect    = "Allow"
    actions   = ["dynamodb:DescribeTable", "dynamodb:DescribeTimeToLive"]
    resources = local.table_arns
  }

  statement {
    sid       = "PageImagesAndUploads"
    effect    = "Allow"
    actions   = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:DeleteObjectVersion"]
    resources = [local.pages_objects, local.upload_objects]
  }

  # `nib user delete` deletes the user's exports too (export_notebook's archives, which would
  # otherwise outlive the account by a day): delete only, no read or write.
  statement {
    sid       = "DeleteUsersExports"
    effect    = "Allow"
    actions   = ["s3:DeleteObject", "s3:DeleteObjectVersion"]
    resources = [local.export_objects]
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
    sid    = "DescribeBucket"
    effect = "Allow"
    actions = [
      "s3:GetBucketNotification",
      "s3:GetBucketPublicAccessBlock",
      "s3:GetEncryptionConfiguration",
    ]
    resources = [aws_s3_bucket.pages.arn]
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

resource "aws_iam_policy" "operator" {
  name        = "${var.name_prefix}-operator"
  description = "What the admin commands of nib (--backend aws) use on this deployment; attach it to the operator's role and list that role in operator_role_arns."
  policy      = data.aws_iam_policy_document.operator.json
}
