# The Notion outbox timer: a push that met Notion's rate limit (429 with Retry-After) or an
# outage waits in the user's outbox (shared/src/notebook/notion.rs). Once a minute (the shortest
# schedule EventBridge offers) EventBridge Scheduler invokes the tasks function, the only one
# with a Notion client and the users' data keys, with the fixed input below; the function then
# pushes every user's due outbox items (Notebook::notion_drain_due), never before Retry-After.
#
# The scheduler assumes its own role, which may invoke the tasks function and nothing else
# (tests/infra/test_infra.py); no resource-based permission is added to the function.

data "aws_iam_policy_document" "scheduler_assume" {
  statement {
    effect  = "Allow"
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["scheduler.amazonaws.com"]
    }
    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account_id]
    }
  }
}

resource "aws_iam_role" "notion_outbox_scheduler" {
  name               = "${var.name_prefix}-notion-outbox-scheduler"
  description        = "Invokes the tasks function to push due Notion outbox items"
  assume_role_policy = data.aws_iam_policy_document.scheduler_assume.json
}

data "aws_iam_policy_document" "notion_outbox_scheduler" {
  statement {
    sid       = "InvokeTasksOnly"
    effect    = "Allow"
    actions   = ["lambda:InvokeFunction"]
    resources = [local.function_arns.tasks]
  }
}

resource "aws_iam_role_policy" "notion_outbox_scheduler" {
  name   = "${var.name_prefix}-notion-outbox-scheduler-invoke"
  role   = aws_iam_role.notion_outbox_scheduler.id
  policy = data.aws_iam_policy_document.notion_outbox_scheduler.json
}

resource "aws_scheduler_schedule" "notion_outbox" {
  #checkov:skip=CKV_AWS_297:The schedule holds only its fixed input {"notion_outbox": "drain"}, no data; a customer key would add a way for the timer to fail and protect nothing.
  name        = "${var.name_prefix}-notion-outbox"
  description = "Pushes due Notion outbox items (tasks function)"

  schedule_expression = "rate(1 minute)"
  flexible_time_window {
    mode = "OFF"
  }

  target {
    arn      = aws_lambda_function.fn["tasks"].arn
    role_arn = aws_iam_role.notion_outbox_scheduler.arn
    # nib::functions::TasksEvent::NotionOutbox: what the tasks function tells from a tool call.
    input = jsonencode({ notion_outbox = "drain" })
    # A pass missed is made up by the next one a minute later: no retries piling up.
    retry_policy {
      maximum_retry_attempts       = 0
      maximum_event_age_in_seconds = 60
    }
  }
}
