# The single table of docs/design.md §5: pk/sk strings, one GSI (gsi1pk/gsi1sk, all attributes), TTL on
# expires_at (codes, refresh tokens, rate windows and soft-deleted items expire by it).

resource "aws_dynamodb_table" "main" {
  name         = local.table_name
  billing_mode = "PAY_PER_REQUEST"
  hash_key     = "pk"
  range_key    = "sk"

  attribute {
    name = "pk"
    type = "S"
  }
  attribute {
    name = "sk"
    type = "S"
  }
  attribute {
    name = "gsi1pk"
    type = "S"
  }
  attribute {
    name = "gsi1sk"
    type = "S"
  }

  global_secondary_index {
    name            = "gsi1"
    hash_key        = "gsi1pk"
    range_key       = "gsi1sk"
    projection_type = "ALL"
  }

  ttl {
    attribute_name = "expires_at"
    enabled        = true
  }

  point_in_time_recovery {
    enabled = true
  }

  server_side_encryption {
    enabled     = true
    kms_key_arn = aws_kms_key.storage.arn
  }

  # `terraform destroy` stops here until this is set to false and applied: the table holds the
  # wrapped data keys, without which nothing in it or in the bucket can be read again.
  deletion_protection_enabled = true
}
