# Three KMS keys, each with one job:
#
#   data    wraps every user's data key (envelope encryption, docs/design.md §6). Only the class
#           functions (pages, tasks, ingest) may use it, only for GenerateDataKey and Decrypt,
#           and only with the encryption context {"user_id": ...}: the key policy says so, not
#           just the roles' policies, so no other principal of the account can unwrap a user's
#           key by being granted IAM permissions later. It also wraps oauth's one server secret
#           (SECRET#oauth, its CSRF key), which only oauth may use, and only under the context
#           {"nib_server_secret": "oauth"}.
#   storage server-side encryption of the table, the bucket, the log groups and the DLQ. Kept
#           apart from the data key because S3 and DynamoDB call KMS with their own encryption
#           context, which the data key's user_id condition (rightly) refuses.
#   signing the OAuth access-token signing key (ECC_NIST_P256, ES256): oauth may kms:Sign with it;
#           the private half never leaves KMS. mcp verifies tokens with the public half, passed as
#           configuration, and has no KMS permission at all.
#
# Deleting the data key makes every user's content unrecoverable (crypto-shredding, by design);
# the 30-day deletion window is the undo.

locals {
  # Key management for the account's administrators (through their IAM policies). No
  # cryptographic operation and no kms:CreateGrant, which would let an administrator hand
  # themselves one: using a key is granted per key below.
  kms_admin_actions = [
    "kms:CancelKeyDeletion",
    "kms:CreateAlias",
    "kms:DeleteAlias",
    "kms:Describe*",
    "kms:DisableKey",
    "kms:DisableKeyRotation",
    "kms:EnableKey",
    "kms:EnableKeyRotation",
    "kms:Get*",
    "kms:List*",
    "kms:PutKeyPolicy",
    "kms:RevokeGrant",
    "kms:RotateKeyOnDemand",
    "kms:ScheduleKeyDeletion",
    "kms:TagResource",
    "kms:UntagResource",
    "kms:UpdateAlias",
    "kms:UpdateKeyDescription",
  ]
  account_root_arn = "arn:${local.partition}:iam::${local.account_id}:root"
}

# ---------------------------------------------------------------------------------------------
# data: users' data keys

resource "aws_kms_key" "data" {
  description             = "${var.name_prefix}: wraps users' data keys (encryption context user_id)"
  key_usage               = "ENCRYPT_DECRYPT"
  enable_key_rotation     = true
  rotation_period_in_days = 365
  deletion_window_in_days = 30
  policy                  = data.aws_iam_policy_document.data_key_policy.json
}

resource "aws_kms_alias" "data" {
  name          = "alias/${var.name_prefix}-data"
  target_key_id = aws_kms_key.data.key_id
}

data "aws_iam_policy_document" "data_key_policy" {
  #checkov:skip=CKV_AWS_111:In a key policy, Resource "*" means this key and nothing else; the principals and conditions are the constraints.
  #checkov:skip=CKV_AWS_356:In a key policy, Resource "*" means this key and nothing else (a key policy cannot name its own key ARN).
  statement {
    sid       = "KeyAdministration"
    effect    = "Allow"
    actions   = local.kms_admin_actions
    resources = ["*"]
    principals {
      type        = "AWS"
      identifiers = [local.account_root_arn]
    }
  }

  statement {
    sid       = "UserDataKeys"
    effect    = "Allow"
    actions   = ["kms:GenerateDataKey", "kms:Decrypt"]
    resources = ["*"]
    principals {
      type = "AWS"
      identifiers = concat(
        [aws_iam_role.fn["pages"].arn, aws_iam_role.fn["tasks"].arn, aws_iam_role.fn["ingest"].arn],
        var.data_key_user_arns,
        var.operator_role_arns,
      )
    }
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

  # oauth's server secret (SECRET#oauth), from which its consent-form CSRF key derives.
  statement {
    sid       = "OAuthServerSecret"
    effect    = "Allow"
    actions   = ["kms:GenerateDataKey", "kms:Decrypt"]
    resources = ["*"]
    principals {
      type        = "AWS"
      identifiers = [aws_iam_role.fn["oauth"].arn]
    }
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
}

# ---------------------------------------------------------------------------------------------
# storage: SSE for the table, the bucket, the log groups and the ingest DLQ

resource "aws_kms_key" "storage" {
  description             = "${var.name_prefix}: server-side encryption of the table, bucket, logs and queue"
  key_usage               = "ENCRYPT_DECRYPT"
  enable_key_rotation     = true
  rotation_period_in_days = 365
  deletion_window_in_days = 30
  policy                  = data.aws_iam_policy_document.storage_key_policy.json
}

resource "aws_kms_alias" "storage" {
  name          = "alias/${var.name_prefix}-storage"
  target_key_id = aws_kms_key.storage.key_id
}

data "aws_iam_policy_document" "storage_key_policy" {
  #checkov:skip=CKV_AWS_111:In a key policy, Resource "*" means this key and nothing else; the principals and conditions are the constraints.
  #checkov:skip=CKV_AWS_356:In a key policy, Resource "*" means this key and nothing else (a key policy cannot name its own key ARN).
  statement {
    sid       = "KeyAdministration"
    effect    = "Allow"
    actions   = local.kms_admin_actions
    resources = ["*"]
    principals {
      type        = "AWS"
      identifiers = [local.account_root_arn]
    }
  }

  # The account's principals may use the key only through DynamoDB, S3 and SQS (the deployer
  # creating the table, the functions reading and writing through those services); who exactly
  # is then up to IAM (iam.tf grants each function role what it uses).
  statement {
    sid    = "UseThroughStorageServices"
    effect = "Allow"
    actions = [
      "kms:CreateGrant",
      "kms:Decrypt",
      "kms:DescribeKey",
      "kms:Encrypt",
      "kms:GenerateDataKey*",
      "kms:ReEncrypt*",
    ]
    resources = ["*"]
    principals {
      type        = "AWS"
      identifiers = [local.account_root_arn]
    }
    condition {
      test     = "StringEquals"
      variable = "kms:CallerAccount"
      values   = [local.account_id]
    }
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

  statement {
    sid    = "CloudWatchLogs"
    effect = "Allow"
    actions = [
      "kms:Decrypt*",
      "kms:Describe*",
      "kms:Encrypt*",
      "kms:GenerateDataKey*",
      "kms:ReEncrypt*",
    ]
    resources = ["*"]
    principals {
      type        = "Service"
      identifiers = ["logs.${local.region}.amazonaws.com"]
    }
    condition {
      test     = "ArnLike"
      variable = "kms:EncryptionContext:aws:logs:arn"
      values = [
        "arn:${local.partition}:logs:${local.region}:${local.account_id}:log-group:/aws/lambda/${var.name_prefix}-*",
        "arn:${local.partition}:logs:${local.region}:${local.account_id}:log-group:/aws/apigateway/${var.name_prefix}-*",
      ]
    }
  }
}

# ---------------------------------------------------------------------------------------------
# signing: OAuth access tokens (JWT, ES256)

resource "aws_kms_key" "signing" {
  # No enable_key_rotation: KMS cannot rotate asymmetric keys (checkov knows, CKV_AWS_7 passes). Rotating means a new key: create it, let oauth sign with it, keep the old public key accepted by mcp for one access-token lifetime (1 h), then delete the old one.
  description              = "${var.name_prefix}: signs OAuth access tokens (ES256)"
  key_usage                = "SIGN_VERIFY"
  customer_master_key_spec = "ECC_NIST_P256"
  deletion_window_in_days  = 30
  policy                   = data.aws_iam_policy_document.signing_key_policy.json
}

resource "aws_kms_alias" "signing" {
  name          = "alias/${var.name_prefix}-signing"
  target_key_id = aws_kms_key.signing.key_id
}

# The public half, for mcp's configuration (read at apply time by the deployer, who may
# kms:GetPublicKey through the administration statement).
data "aws_kms_public_key" "signing" {
  key_id = aws_kms_key.signing.arn
}

data "aws_iam_policy_document" "signing_key_policy" {
  #checkov:skip=CKV_AWS_111:In a key policy, Resource "*" means this key and nothing else; the principals and conditions are the constraints.
  #checkov:skip=CKV_AWS_356:In a key policy, Resource "*" means this key and nothing else (a key policy cannot name its own key ARN).
  statement {
    sid       = "KeyAdministration"
    effect    = "Allow"
    actions   = local.kms_admin_actions
    resources = ["*"]
    principals {
      type        = "AWS"
      identifiers = [local.account_root_arn]
    }
  }

  statement {
    sid       = "SignAccessTokens"
    effect    = "Allow"
    actions   = ["kms:Sign"]
    resources = ["*"]
    principals {
      type        = "AWS"
      identifiers = [aws_iam_role.fn["oauth"].arn]
    }
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
    resources = ["*"]
    principals {
      type        = "AWS"
      identifiers = [aws_iam_role.fn["oauth"].arn]
    }
  }
}
