"""Least-privilege and hardening rules of the Terraform in infra/, asserted on the parsed HCL.

Terraform cannot plan here (no provider downloads), so these tests read the source: every
`.tf` file parsed with python-hcl2, references such as `local.table_arns` resolved one level
against the `locals` blocks. They pin the decisions that must not regress quietly: which role
reaches which items, keys and objects, and how the table, bucket, keys and functions are
hardened. A change that loosens one fails here and has to change the test too, on purpose.

Run with `make test-infra` (which also runs `terraform fmt -check` and checkov), or alone:
`.venv/bin/python -m pytest tests/infra`.
"""

from __future__ import annotations

import re
from pathlib import Path

import hcl2
import pytest

INFRA = Path(__file__).resolve().parents[2] / "infra"

FUNCTIONS = {"mcp", "pages", "tasks", "ingest", "oauth", "account"}
CLASS_FUNCTIONS = {"pages", "tasks", "ingest"}

# The partition-key prefixes (docs/design.md §5) each role may reach, through dynamodb:LeadingKeys.
LEADING_KEYS = {
    # SESSION#: a page view reads and refreshes its browser session (sign-out is oauth's).
    "mcp": {"TOK#*", "RL#*", "GRANT#*", "SESSION#*"},
    # SECRET#oauth exactly: the one server secret oauth needs (its CSRF key), not SECRET#*.
    # RL#: only the counters of its own limits (sign-ins per user name, registrations, per
    # client address), never mcp's per-credential ones (RL#* would let it reset those).
    "oauth": {"CLIENT#*", "CODE#*", "RT#*", "GRANT#*", "USER#*", "SESSION#*", "SECRET#oauth",
              "RL#login#*", "RL#oauth-register#*", "RL#oauth-addr#*"},
    "pages": {"U#*"},
    "tasks": {"U#*"},
    "ingest": {"U#*"},
    # What a deletion removes (account::Accounts::delete): the user's partitions and postings,
    # the sign-in partition, and the credentials kept outside them (CLIENT#: approvals).
    "account": {"U#*", "USER#*", "TOK#*", "GRANT#*", "RT#*", "SESSION#*", "CLIENT#*"},
}

# Index partitions (gsi1pk) a role may Query beyond its own items, each in an index-only
# statement: mcp lists a user's grants and tokens (the web app's connections screen), oauth a
# user's sessions ("sign out everywhere"). Never a user's notebook partition.
INDEX_KEYS = {
    "mcp": {"U#*#GRANTS", "U#*#TOKENS"},
    "oauth": {"U#*#SESSIONS"},
    # account::credential_partitions: where a deletion finds the user's credentials.
    "account": {"U#*#TOKENS", "U#*#GRANTS", "U#*#RT", "U#*#SESSIONS", "U#*#APPROVED"},
}

DATA_KEY_ACTIONS = {"kms:GenerateDataKey", "kms:Decrypt"}
# The encryption-context entry that binds a server secret to its purpose (PURPOSE_CONTEXT in
# shared/src/adapters/aws/kms.rs); oauth's is "oauth" (SECRET#oauth).
SERVER_SECRET_CONTEXT = "nib_server_secret"


# ---------------------------------------------------------------------------------------------
# The parsed configuration


class Infra:
    """Every block of infra/*.tf, by kind, type and name."""

    def __init__(self, folder: Path) -> None:
        options = hcl2.SerializationOptions(
            strip_string_quotes=True, with_comments=False, explicit_blocks=False
        )
        self.files = sorted(folder.glob("*.tf"))
        self.resources: dict[str, dict[str, dict]] = {}
        self.data: dict[str, dict[str, dict]] = {}
        self.locals: dict[str, object] = {}
        self.outputs: dict[str, dict] = {}
        self.variables: dict[str, dict] = {}
        for path in self.files:
            with path.open() as f:
                parsed = hcl2.load(f, serialization_options=options)
            for block in parsed.get("resource", []):
                for rtype, named in block.items():
                    self.resources.setdefault(rtype, {}).update(named)
            for block in parsed.get("data", []):
                for dtype, named in block.items():
                    self.data.setdefault(dtype, {}).update(named)
            for block in parsed.get("locals", []):
                self.locals.update(block)
            for block in parsed.get("output", []):
                self.outputs.update(block)
            for block in parsed.get("variable", []):
                self.variables.update(block)

    def resource(self, rtype: str, name: str) -> dict:
        assert name in self.resources.get(rtype, {}), f"missing resource {rtype}.{name}"
        return self.resources[rtype][name]

    def policy_document(self, name: str) -> dict:
        docs = self.data.get("aws_iam_policy_document", {})
        assert name in docs, f"missing data.aws_iam_policy_document.{name}"
        return docs[name]

    def resolve(self, value):
        """A whole-value `${local.x}` / `${local.x.y}` reference replaced by what it names."""
        if isinstance(value, str):
            m = re.fullmatch(r"\$\{local\.([A-Za-z0-9_]+)((?:\.[A-Za-z0-9_]+)*)\}", value)
            if m:
                target = self.locals[m.group(1)]
                for attr in filter(None, m.group(2).split(".")):
                    if not isinstance(target, dict):
                        # A computed local (a for expression): keep the reference itself.
                        return value
                    target = target[attr]
                return self.resolve(target)
        return value


def as_list(value) -> list:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


class Statement:
    """One statement of an aws_iam_policy_document, with its references resolved. A statement
    of a `dynamic "statement"` block keeps the block's `for_each` (the expression, unevaluated:
    when it is there at all); a plain statement's is None (always there)."""

    def __init__(self, infra: Infra, raw: dict, where: str, for_each: str | None = None) -> None:
        self.where = f"{where}/{raw.get('sid', '?')}"
        self.for_each = for_each
        self.effect = raw.get("effect", "Allow")
        self.actions = [str(a) for a in as_list(infra.resolve(raw.get("actions")))]
        self.resources = [
            str(infra.resolve(r)) for r in as_list(infra.resolve(raw.get("resources")))
        ]
        self.principals = [
            (p.get("type"), as_list(infra.resolve(p.get("identifiers"))))
            for p in as_list(raw.get("principals"))
        ]
        self.conditions = [
            (c["test"], c["variable"], [str(v) for v in as_list(infra.resolve(c["values"]))])
            for c in as_list(raw.get("condition"))
        ]

    def condition(self, test: str, variable: str) -> list[str] | None:
        for t, v, values in self.conditions:
            if t == test and v == variable:
                return values
        return None

    def touches(self, service: str) -> bool:
        """True when any action is of `service` (or a wildcard that covers it)."""
        return any(a == "*" or a.split(":")[0] == service for a in self.actions)

    def on(self, reference: str) -> bool:
        """True when a resource names `reference` (e.g. aws_kms_key.data) or is `*`."""
        return any(r == "*" or reference in r for r in self.resources)

    def __repr__(self) -> str:
        return f"<{self.where} {self.effect} {self.actions} on {self.resources}>"


def statements(infra: Infra, doc: str) -> list[Statement]:
    raw = infra.policy_document(doc)
    out = [Statement(infra, s, doc) for s in as_list(raw.get("statement"))]
    for block in as_list(raw.get("dynamic")):
        dynamic = block.get("statement")
        if dynamic is None:
            continue
        for content in as_list(dynamic.get("content")):
            out.append(Statement(infra, content, doc, for_each=dynamic["for_each"]))
    return out


@pytest.fixture(scope="module")
def infra() -> Infra:
    return Infra(INFRA)


@pytest.fixture(scope="module")
def role_statements(infra: Infra) -> dict[str, list[Statement]]:
    """Every statement each function's role gets: its own document plus the shared base one."""
    attached = infra.resource("aws_iam_role_policy", "fn")
    policies = infra.resolve(attached["for_each"])
    assert set(policies) == FUNCTIONS, "every function needs exactly one access policy"
    out = {}
    for fn, ref in policies.items():
        m = re.fullmatch(r"\$\{data\.aws_iam_policy_document\.([a-z_]+)\.json\}", ref)
        assert m, f"{fn}'s policy must be a policy document, got {ref}"
        out[fn] = statements(infra, m.group(1)) + statements(infra, "base")
    return out


# ---------------------------------------------------------------------------------------------
# Sanity: the parse saw the configuration (so nothing below passes on an empty model)


def test_the_configuration_is_all_there(infra: Infra) -> None:
    names = {p.name for p in infra.files}
    for expected in ("versions.tf", "variables.tf", "api.tf", "lambda.tf", "dynamodb.tf",
                     "s3.tf", "kms.tf", "iam.tf", "outputs.tf"):
        assert expected in names
    assert set(infra.locals["default_settings"]) == FUNCTIONS


def test_every_role_statement_allows(role_statements) -> None:
    # A Deny in a role would be a sign of a grant too wide somewhere else; keep roles allow-only.
    for fn, stmts in role_statements.items():
        for s in stmts:
            assert s.effect == "Allow", s


def test_no_role_has_wildcard_actions(role_statements) -> None:
    for fn, stmts in role_statements.items():
        for s in stmts:
            for a in s.actions:
                assert a != "*" and not a.endswith(":*"), f"{fn}: wildcard action in {s}"


# ---------------------------------------------------------------------------------------------
# DynamoDB: every role reaches only its own partitions


def test_every_dynamodb_statement_is_limited_by_leading_keys(role_statements) -> None:
    # Each statement within the role's partitions; together, all of them (a statement may
    # allow an action on fewer: account puts only where a deletion writes).
    for fn, stmts in role_statements.items():
        dynamo = [s for s in stmts if s.touches("dynamodb")]
        assert dynamo, f"{fn} has no DynamoDB statement at all?"
        on_table = set()
        for s in dynamo:
            keys = s.condition("ForAllValues:StringLike", "dynamodb:LeadingKeys")
            assert keys is not None, f"{fn}: DynamoDB statement without LeadingKeys: {s}"
            if index_only(s):
                assert set(keys) == INDEX_KEYS[fn], f"{fn}: index LeadingKeys {keys} in {s}"
            else:
                assert set(keys) <= LEADING_KEYS[fn], f"{fn}: LeadingKeys {keys} in {s}"
                on_table |= set(keys)
        assert on_table == LEADING_KEYS[fn], fn


def index_only(s) -> bool:
    return bool(s.resources) and all(r.endswith("/index/gsi1") for r in s.resources)


def test_mcp_reaches_only_tokens_rate_windows_grants_and_sessions(role_statements) -> None:
    for s in role_statements["mcp"]:
        if s.touches("dynamodb"):
            keys = s.condition("ForAllValues:StringLike", "dynamodb:LeadingKeys")
            if index_only(s):
                # The GSI holds user-partition keys: only the user's grants and tokens, read only.
                assert s.actions == ["dynamodb:Query"], s
                assert set(keys) == {"U#*#GRANTS", "U#*#TOKENS"}, s
                continue
            assert set(keys) <= {"TOK#*", "RL#*", "GRANT#*", "SESSION#*"}
            # The table only: the GSI holds user-partition keys (U#...#TOKENS and others).
            assert not any("/index/" in r for r in s.resources), s


def test_only_oauth_reaches_a_server_secret_and_only_its_own(role_statements) -> None:
    # SECRET# items are server secrets wrapped by the data key; oauth needs SECRET#oauth (its
    # CSRF key) and nothing else there; no other role needs any.
    for fn, stmts in role_statements.items():
        for s in stmts:
            if not s.touches("dynamodb"):
                continue
            keys = s.condition("ForAllValues:StringLike", "dynamodb:LeadingKeys") or []
            secrets = [k for k in keys if k.startswith("SECRET#") or k in ("*", "S*", "SE*")]
            if fn == "oauth" and not index_only(s):
                assert secrets == ["SECRET#oauth"], s
            else:
                assert not secrets, f"{fn} reaches server secrets: {s}"


def test_no_role_can_scan(role_statements) -> None:
    # A Scan has no leading key, so ForAllValues:StringLike would not hold it back.
    for fn, stmts in role_statements.items():
        for s in stmts:
            assert "dynamodb:Scan" not in s.actions, f"{fn} may Scan: {s}"
            assert "dynamodb:PartiQLSelect" not in s.actions, f"{fn} may PartiQLSelect: {s}"


def test_account_reaches_what_a_deletion_removes_and_nothing_else(role_statements) -> None:
    # account::Accounts::delete gets, queries and deletes in every partition a user's items
    # live in, and puts only the deletion marker (USER#) and the data key's tombstones (U#):
    # it never writes a token, grant, refresh token, session or client item (issue 48 item 9:
    # one statement used to allow PutItem on all of them). It never updates a counter, and it
    # opens nothing sealed: no KMS key of its own, only DynamoDB's use of the storage key.
    puts = set()
    for s in role_statements["account"]:
        if s.touches("dynamodb"):
            keys = set(s.condition("ForAllValues:StringLike", "dynamodb:LeadingKeys") or [])
            if index_only(s):
                assert s.actions == ["dynamodb:Query"], s
                continue
            assert s.resources == ["${aws_dynamodb_table.main.arn}"], s
            if "dynamodb:PutItem" in s.actions:
                assert s.actions == ["dynamodb:PutItem"], f"put and delete in one statement: {s}"
                puts |= keys
            else:
                assert set(s.actions) == {
                    "dynamodb:BatchGetItem", "dynamodb:DeleteItem", "dynamodb:GetItem",
                    "dynamodb:Query"}, s
                assert keys == LEADING_KEYS["account"], s
        if s.touches("kms"):
            assert s.resources == ["${aws_kms_key.storage.arn}"], s
        if s.touches("s3") and s.actions == ["s3:ListBucketVersions"]:
            assert s.resources == ["${aws_s3_bucket.pages.arn}"], s
            assert set(s.condition("StringLike", "s3:prefix") or []) == {
                "u/*", "uploads/*", "exports/*"}, s
        elif s.touches("s3"):
            assert set(s.actions) == {"s3:DeleteObject", "s3:DeleteObjectVersion"}, s
    assert puts == {"U#*", "USER#*"}, puts


# ---------------------------------------------------------------------------------------------
# KMS: the data key only for the class functions, only under the user_id context


def assert_user_context(s: Statement) -> None:
    assert s.condition("ForAllValues:StringEquals", "kms:EncryptionContextKeys") == ["user_id"], s
    assert s.condition("Null", "kms:EncryptionContext:user_id") == ["false"], s


def assert_oauth_secret_context(s: Statement) -> None:
    # Exactly the context of SECRET#oauth: the purpose "oauth", and no other entry (so no user
    # key, wrapped under {"user_id": ...}, can be opened or minted with it).
    assert s.condition("StringEquals", f"kms:EncryptionContext:{SERVER_SECRET_CONTEXT}") == [
        "oauth"
    ], s
    assert s.condition("ForAllValues:StringEquals", "kms:EncryptionContextKeys") == [
        SERVER_SECRET_CONTEXT
    ], s
    assert s.condition("Null", "kms:EncryptionContext:user_id") is None, s


def test_every_data_key_statement_carries_the_encryption_context(role_statements) -> None:
    seen = set()
    for fn, stmts in role_statements.items():
        for s in stmts:
            if s.touches("kms") and s.on("aws_kms_key.data"):
                assert fn in CLASS_FUNCTIONS | {"oauth"}, f"{fn} may use the data key: {s}"
                assert set(s.actions) <= DATA_KEY_ACTIONS, s
                if fn == "oauth":
                    assert_oauth_secret_context(s)
                else:
                    assert_user_context(s)
                seen.add(fn)
    assert seen == CLASS_FUNCTIONS | {"oauth"}


def test_the_data_key_policy_admits_only_class_functions_and_oauth_under_their_context(
    infra: Infra,
) -> None:
    key = infra.resource("aws_kms_key", "data")
    assert key["policy"] == "${data.aws_iam_policy_document.data_key_policy.json}"
    usable = {}
    for s in statements(infra, "data_key_policy"):
        crypto = [a for a in s.actions if a in DATA_KEY_ACTIONS or a in (
            "kms:*", "kms:Encrypt", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:CreateGrant")]
        if s.effect != "Allow" or not crypto:
            continue
        assert set(s.actions) <= DATA_KEY_ACTIONS, s
        principals = " ".join(str(i) for _, ids in s.principals for i in ids)
        roles = set(re.findall(r'aws_iam_role\.fn\["([a-z]+)"\]', principals))
        if roles == {"oauth"}:
            assert_oauth_secret_context(s)
            assert [ids for _, ids in s.principals] == [['${aws_iam_role.fn["oauth"].arn}']], s
        else:
            assert roles == CLASS_FUNCTIONS, f"data key usable by {roles}"
            assert_user_context(s)
        usable[frozenset(roles)] = s
    assert set(usable) == {frozenset(CLASS_FUNCTIONS), frozenset({"oauth"})}


def test_mcp_uses_kms_only_through_dynamodb(role_statements) -> None:
    # mcp verifies tokens with a public key from its configuration: no KMS call of its own, only
    # DynamoDB decrypting the table for it. The uploads it signs are encrypted for the uploads
    # role's sessions (test_uploads_are_signed_by_a_role_only_mcp_assumes).
    for s in role_statements["mcp"]:
        if s.touches("kms"):
            assert s.resources == ["${aws_kms_key.storage.arn}"], s
            assert s.condition("StringEquals", "kms:ViaService") == [
                "dynamodb.${local.region}.amazonaws.com",
            ], s


def test_mcp_has_no_data_or_signing_key_access(infra: Infra, role_statements) -> None:
    for s in role_statements["mcp"]:
        if s.touches("kms"):
            assert not s.on("aws_kms_key.data") and not s.on("aws_kms_key.signing"), s
            assert set(s.actions).isdisjoint({"kms:Sign", "kms:GetPublicKey"}), s
    # Nor through a key policy.
    for doc in ("data_key_policy", "signing_key_policy"):
        for s in statements(infra, doc):
            for _, ids in s.principals:
                assert not any('fn["mcp"]' in str(i) for i in ids), f"{doc} names mcp: {s}"


def test_storage_key_is_used_only_through_services(role_statements) -> None:
    # The storage key (table, bucket, logs, DLQ) is usable only by the service acting for the
    # role, never directly: a role can read an item or an object, not decrypt on its own.
    for fn, stmts in role_statements.items():
        for s in stmts:
            if s.touches("kms") and s.on("aws_kms_key.storage"):
                services = s.condition("StringEquals", "kms:ViaService")
                assert services, f"{fn}: storage key without kms:ViaService: {s}"
                for v in services:
                    assert re.fullmatch(r"(dynamodb|s3|sqs)\.\$\{local\.region\}\.amazonaws\.com", v)
    for s in role_statements["tasks"] + role_statements["oauth"] + role_statements["account"]:
        if s.touches("kms") and s.on("aws_kms_key.storage"):
            assert s.condition("StringEquals", "kms:ViaService") == [
                "dynamodb.${local.region}.amazonaws.com"
            ], s


def test_only_oauth_signs_tokens(infra: Infra, role_statements) -> None:
    for fn, stmts in role_statements.items():
        for s in stmts:
            if "kms:Sign" in s.actions:
                assert fn == "oauth", s
                assert s.on("aws_kms_key.signing"), s
                assert s.condition("StringEquals", "kms:SigningAlgorithm") == ["ECDSA_SHA_256"]
    signing = infra.resource("aws_kms_key", "signing")
    assert signing["key_usage"] == "SIGN_VERIFY"
    assert signing["customer_master_key_spec"] == "ECC_NIST_P256"


def test_symmetric_keys_rotate(infra: Infra) -> None:
    for name in ("data", "storage"):
        key = infra.resource("aws_kms_key", name)
        assert key["enable_key_rotation"] is True, name
        assert key["deletion_window_in_days"] >= 7, name


# ---------------------------------------------------------------------------------------------
# S3


def test_tasks_has_no_s3(role_statements) -> None:
    for s in role_statements["tasks"]:
        assert not s.touches("s3"), s
        assert not any("aws_s3_bucket" in r for r in s.resources), s


def test_oauth_has_no_s3(role_statements) -> None:
    for s in role_statements["oauth"]:
        assert not s.touches("s3"), s


def test_s3_grants_are_per_prefix(role_statements) -> None:
    # pages reads page images and re-tags them by copying them onto themselves (the trash),
    # and writes and reads exports (export_notebook's archive and its presigned GET); ingest
    # reads uploads and writes page images; mcp has no S3 permission at all: the uploads it
    # signs are signed as sessions of the uploads role (test_uploads_are_signed_by_a_role_only_
    # mcp_assumes), so it reads no upload and no page image and writes nothing. account only deletes (every version)
    # under the three prefixes a user's objects live in, and lists versions only there
    # (test_account_reaches_what_a_deletion_removes_and_nothing_else). Nothing else lists,
    # deletes, or touches the bucket itself.
    expected = {
        # Issue 48 item 9: mcp, internet-facing, used to put under every user's uploads/.
        "mcp": set(),
        "pages": {
            ("s3:GetObject", "${aws_s3_bucket.pages.arn}/u/*"),
            ("s3:GetObjectTagging", "${aws_s3_bucket.pages.arn}/u/*"),
            ("s3:PutObjectTagging", "${aws_s3_bucket.pages.arn}/u/*"),
            ("s3:PutObject", "${aws_s3_bucket.pages.arn}/u/*"),
            ("s3:GetObject", "${aws_s3_bucket.pages.arn}/exports/*"),
            ("s3:PutObject", "${aws_s3_bucket.pages.arn}/exports/*"),
        },
        "ingest": {
            ("s3:GetObject", "${aws_s3_bucket.pages.arn}/uploads/*"),
            ("s3:PutObject", "${aws_s3_bucket.pages.arn}/u/*"),
        },
        "account": {
            (action, "${aws_s3_bucket.pages.arn}/" + prefix)
            for action in ("s3:DeleteObject", "s3:DeleteObjectVersion")
            for prefix in ("u/*", "uploads/*", "exports/*")
        } | {("s3:ListBucketVersions", "${aws_s3_bucket.pages.arn}")},
    }
    for fn, grants in expected.items():
        got = {(a, r) for s in role_statements[fn] if s.touches("s3")
               for a in s.actions for r in s.resources}
        assert got == grants, fn


def test_uploads_are_signed_by_a_role_only_mcp_assumes(infra: Infra, role_statements) -> None:
    """Issue 48 item 9: the web app's presigned POSTs are signed as sessions of the uploads
    role, which may only put under uploads/ (and encrypt through S3); only mcp may assume it,
    and mcp may assume nothing else. Each session is narrowed further to the upload's own keys
    by the session policy mcp sends (presigned_post::upload_session_policy, tested in Rust)."""
    role = infra.resource("aws_iam_role", "uploads")
    assert role["assume_role_policy"] == "${data.aws_iam_policy_document.uploads_assume.json}"
    assert role["max_session_duration"] <= 3600
    trust = statements(infra, "uploads_assume")
    assert len(trust) == 1
    assert trust[0].actions == ["sts:AssumeRole"]
    assert trust[0].principals == [("AWS", ['${aws_iam_role.fn["mcp"].arn}'])], trust[0]
    attached = infra.resource("aws_iam_role_policy", "uploads")
    assert attached["role"] == "${aws_iam_role.uploads.id}"
    assert attached["policy"] == "${data.aws_iam_policy_document.uploads.json}"
    grants = {(a, r) for s in statements(infra, "uploads") for a in s.actions
              for r in s.resources}
    assert grants == {
        ("s3:PutObject", "${aws_s3_bucket.pages.arn}/uploads/*"),
        ("kms:Encrypt", "${aws_kms_key.storage.arn}"),
        ("kms:GenerateDataKey*", "${aws_kms_key.storage.arn}"),
    }, grants
    for s in statements(infra, "uploads"):
        assert s.effect == "Allow", s
        if s.touches("kms"):
            assert s.condition("StringEquals", "kms:ViaService") == [
                "s3.${local.region}.amazonaws.com"], s
    # mcp may assume the uploads role and nothing else; no other function may assume a role.
    for fn, stmts in role_statements.items():
        for s in stmts:
            if s.touches("sts"):
                assert fn == "mcp", f"{fn} may call STS: {s}"
                assert s.actions == ["sts:AssumeRole"], s
                assert s.resources == ["${aws_iam_role.uploads.arn}"], s
    assert any(s.touches("sts") for s in role_statements["mcp"])


def test_pages_writes_page_images_only_as_copies_of_page_images(role_statements) -> None:
    # The trash's CopyObject onto the same key: pages never uploads bytes of its own under u/
    # (its only other put is exports/, test_exports_are_kept_a_day_only).
    puts = [s for s in role_statements["pages"] if "s3:PutObject" in s.actions
            and any(r.endswith("/u/*") for r in s.resources)]
    assert puts
    for s in puts:
        assert s.actions == ["s3:PutObject"], s
        assert s.condition("StringLike", "s3:x-amz-copy-source") == [
            "${aws_s3_bucket.pages.bucket}/u/*"
        ], s


def test_exports_are_kept_a_day_only(infra: Infra, role_statements) -> None:
    # export_notebook's archives: only pages writes them, only under exports/, and the bucket
    # deletes them a day later (and their noncurrent versions a day after that). The operator
    # and the account function may only delete them
    # (test_the_operator_reaches_only_page_images_and_uploads, test_s3_grants_are_per_prefix).
    for fn, statements_ in role_statements.items():
        for s in statements_:
            if fn == "account":
                continue
            if any("/exports/" in r for r in s.resources):
                assert fn == "pages", (fn, s)
                assert set(s.actions) == {"s3:GetObject", "s3:PutObject"}, s
                assert s.resources == ["${aws_s3_bucket.pages.arn}/exports/*"], s
    rules = as_list(infra.resource("aws_s3_bucket_lifecycle_configuration", "pages")["rule"])
    exports = [r for r in rules if as_list(r.get("filter"))
               and as_list(r["filter"])[0].get("prefix") == "exports/"]
    assert len(exports) == 1, rules
    rule = exports[0]
    assert rule["status"] == "Enabled"
    assert as_list(rule["expiration"])[0]["days"] == 1
    assert as_list(rule["noncurrent_version_expiration"])[0]["noncurrent_days"] == 1


def trash_days() -> int:
    source = (INFRA.parent / "shared/domain/src/lib.rs").read_text()
    m = re.search(r"pub const TRASH_DAYS: i64 = (\d+);", source)
    assert m, "TRASH_DAYS in shared/domain/src/lib.rs"
    return int(m.group(1))


def test_trashed_page_images_expire_a_day_after_the_trash(infra: Infra) -> None:
    # delete_page tags a page's images nib-trash=1 by copying them onto themselves (the days
    # count from the delete); they must outlive the 30 restorable days (ASSET_PURGE_DAYS =
    # TRASH_DAYS + 1), and their tagged noncurrent versions go soon after.
    rules = as_list(infra.resource("aws_s3_bucket_lifecycle_configuration", "pages")["rule"])
    tagged = [
        r for r in rules
        if r["status"] == "Enabled" and as_list(r.get("filter"))
        and as_list(as_list(r["filter"])[0].get("tag")) == [{"key": "nib-trash", "value": "1"}]
    ]
    assert len(tagged) == 1, rules
    rule = tagged[0]
    assert as_list(rule["expiration"])[0]["days"] == trash_days() + 1
    assert as_list(rule["noncurrent_version_expiration"])[0]["noncurrent_days"] == 1
    # The rule on every object removes the version current before the delete, and the delete
    # markers, in time too.
    everything = [r for r in rules if as_list(r.get("filter")) in ([], [{}])]
    assert everything and "noncurrent_version_expiration" in everything[0], rules


def test_bucket_blocks_public_access(infra: Infra) -> None:
    block = infra.resource("aws_s3_bucket_public_access_block", "pages")
    assert block["bucket"] == "${aws_s3_bucket.pages.id}"
    for flag in ("block_public_acls", "block_public_policy", "ignore_public_acls",
                 "restrict_public_buckets"):
        assert block[flag] is True, flag
    ownership = infra.resource("aws_s3_bucket_ownership_controls", "pages")
    assert as_list(ownership["rule"])[0]["object_ownership"] == "BucketOwnerEnforced"


def test_bucket_denies_insecure_transport(infra: Infra) -> None:
    policy = infra.resource("aws_s3_bucket_policy", "pages")
    assert policy["policy"] == "${data.aws_iam_policy_document.pages_bucket.json}"
    denies = [s for s in statements(infra, "pages_bucket") if s.effect == "Deny"]
    assert any(
        s.actions == ["s3:*"]
        and s.condition("Bool", "aws:SecureTransport") == ["false"]
        and set(s.resources) == {"${aws_s3_bucket.pages.arn}", "${aws_s3_bucket.pages.arn}/*"}
        and s.principals == [("*", ["*"])]
        for s in denies
    ), denies
    assert all(s.effect == "Deny" for s in statements(infra, "pages_bucket"))


def test_bucket_is_encrypted_versioned_and_expires_uploads(infra: Infra) -> None:
    sse = infra.resource("aws_s3_bucket_server_side_encryption_configuration", "pages")
    rule = as_list(sse["rule"])[0]
    default = as_list(rule["apply_server_side_encryption_by_default"])[0]
    assert default["sse_algorithm"] == "aws:kms"
    assert default["kms_master_key_id"] == "${aws_kms_key.storage.arn}"
    assert rule["bucket_key_enabled"] is True

    versioning = infra.resource("aws_s3_bucket_versioning", "pages")
    assert as_list(versioning["versioning_configuration"])[0]["status"] == "Enabled"

    rules = as_list(infra.resource("aws_s3_bucket_lifecycle_configuration", "pages")["rule"])
    uploads = [r for r in rules if as_list(r.get("filter"))
               and as_list(r["filter"])[0].get("prefix") == "uploads/"]
    assert uploads and uploads[0]["status"] == "Enabled" and "expiration" in uploads[0]
    assert any("noncurrent_version_expiration" in r for r in rules)


def test_uploads_trigger_ingest(infra: Infra) -> None:
    notification = infra.resource("aws_s3_bucket_notification", "pages")
    target = as_list(notification["lambda_function"])[0]
    assert target["lambda_function_arn"] == '${aws_lambda_function.fn["ingest"].arn}'
    assert target["filter_prefix"] == "uploads/"


# ---------------------------------------------------------------------------------------------
# Lambda: who may invoke whom


def test_only_mcp_may_invoke_the_class_functions(infra: Infra, role_statements) -> None:
    for fn, stmts in role_statements.items():
        for s in stmts:
            if s.touches("lambda"):
                assert fn == "mcp", f"{fn} may call Lambda: {s}"
                assert s.actions == ["lambda:InvokeFunction"], s
                assert set(s.resources) == {
                    "${local.function_arns.pages}",
                    "${local.function_arns.tasks}",
                    "${local.function_arns.account}",
                }, s
    # Resource-based permissions: API Gateway may invoke mcp and oauth, S3 ingest; nothing
    # names pages, tasks or account (and no API route leads to them: test_api_routes_and_stage).
    targets = {}
    for name, perm in infra.resources.get("aws_lambda_permission", {}).items():
        m = re.fullmatch(r'\$\{aws_lambda_function\.fn\["([a-z]+)"\]\.function_name\}',
                         perm["function_name"])
        assert m, f"aws_lambda_permission.{name} names no function of ours"
        targets.setdefault(m.group(1), set()).add(perm["principal"])
    assert targets == {
        "mcp": {"apigateway.amazonaws.com"},
        "oauth": {"apigateway.amazonaws.com"},
        "ingest": {"s3.amazonaws.com"},
    }
    for perm in infra.resources["aws_lambda_permission"].values():
        assert perm.get("source_arn"), "every permission is scoped to its source"


def test_the_notion_outbox_timer_may_invoke_tasks_and_nothing_else(infra: Infra) -> None:
    # EventBridge Scheduler invokes the tasks function once a minute (the Notion outbox) as its
    # own role, which may invoke that function only, and which only the scheduler of this
    # account may assume.
    schedule = infra.resource("aws_scheduler_schedule", "notion_outbox")
    assert schedule["schedule_expression"] == "rate(1 minute)"
    target = as_list(schedule["target"])[0]
    assert target["arn"] == '${aws_lambda_function.fn["tasks"].arn}'
    assert target["role_arn"] == "${aws_iam_role.notion_outbox_scheduler.arn}"
    # The input the tasks function tells from a tool call (TasksEvent::NotionOutbox).
    assert "notion_outbox" in str(target["input"]) and "drain" in str(target["input"])
    role = infra.resource("aws_iam_role", "notion_outbox_scheduler")
    assert role["assume_role_policy"] == "${data.aws_iam_policy_document.scheduler_assume.json}"
    [assume] = statements(infra, "scheduler_assume")
    assert assume.actions == ["sts:AssumeRole"]
    assert assume.principals == [("Service", ["scheduler.amazonaws.com"])]
    assert assume.condition("StringEquals", "aws:SourceAccount") == ["${local.account_id}"]
    attached = infra.resource("aws_iam_role_policy", "notion_outbox_scheduler")
    assert attached["role"] == "${aws_iam_role.notion_outbox_scheduler.id}"
    assert attached["policy"] == "${data.aws_iam_policy_document.notion_outbox_scheduler.json}"
    [invoke] = statements(infra, "notion_outbox_scheduler")
    assert invoke.actions == ["lambda:InvokeFunction"]
    assert invoke.resources == ["${local.function_arns.tasks}"]


# ---------------------------------------------------------------------------------------------
# Textract: ingest reads handwriting, with one action, and nobody else may


def test_only_ingest_calls_textract_and_only_detect_document_text(role_statements) -> None:
    granted = []
    for fn, stmts in role_statements.items():
        for s in stmts:
            if s.touches("textract") or any(a.startswith("textract") for a in s.actions):
                assert fn == "ingest", f"{fn} may call Textract: {s}"
                # Every action of the statement is this one (no Start*/Get*/Analyze*, no
                # wildcard such as textract:Detect*).
                assert s.actions == ["textract:DetectDocumentText"], s
                # DetectDocumentText has no resource-level permissions: "*" is all there is.
                assert s.resources == ["*"], s
                assert not s.conditions, s
                # Granted only while Textract is the engine (a remote provider needs none).
                assert s.for_each == '${var.ocr_provider == "textract" ? ["textract"] : []}', s
                granted.append(s)
    assert len(granted) == 1, granted


# ---------------------------------------------------------------------------------------------
# A remote OCR provider's key: in a secret only ingest reads, and only the one named


def test_only_ingest_reads_a_secret_and_only_the_one_the_operator_names(
    infra: Infra, role_statements
) -> None:
    """Issue 46: the key of a remote OCR provider is in a Secrets Manager secret whose ARN the
    operator gives (var.ocr_api_key_secret_arn). ingest may GetSecretValue on exactly that ARN
    (no wildcard, no other secret, no other action), and has no such statement at all when the
    variable is empty (its default). No other role, nor the operator, reads any secret."""
    variable = infra.variables["ocr_api_key_secret_arn"]
    assert variable["default"] == "", "no secret unless the operator names one"
    granted = []
    for fn, stmts in role_statements.items():
        for s in stmts:
            if not s.touches("secretsmanager"):
                continue
            assert fn == "ingest", f"{fn} may read a secret: {s}"
            assert s.actions == ["secretsmanager:GetSecretValue"], s
            assert s.resources == ["${var.ocr_api_key_secret_arn}"], s
            assert not s.conditions, s
            # A dynamic statement that is there only when the variable names a secret: an
            # empty ARN must not become a statement on "" (or, worse, on "*").
            assert s.for_each == '${var.ocr_api_key_secret_arn != "" ? ["secret"] : []}', s
            granted.append(s)
    assert len(granted) == 1, granted
    for s in statements(infra, "operator"):
        assert not s.touches("secretsmanager"), s


def test_the_ocr_keys_kms_key_decrypts_only_that_secret_through_secrets_manager(
    infra: Infra, role_statements
) -> None:
    """A secret under the operator's own KMS key needs kms:Decrypt: only for ingest, only
    through Secrets Manager, only under the encryption context of the named secret, and only
    when both the secret and the key are named."""
    assert infra.variables["ocr_api_key_secret_kms_key_arn"]["default"] == ""
    found = []
    for fn, stmts in role_statements.items():
        for s in stmts:
            if s.touches("kms") and any("ocr_api_key_secret" in r for r in s.resources):
                assert fn == "ingest", s
                assert s.actions == ["kms:Decrypt"], s
                assert s.resources == ["${var.ocr_api_key_secret_kms_key_arn}"], s
                assert s.condition("StringEquals", "kms:ViaService") == [
                    "secretsmanager.${local.region}.amazonaws.com"
                ], s
                assert s.condition("StringEquals", "kms:EncryptionContext:SecretARN") == [
                    "${var.ocr_api_key_secret_arn}"
                ], s
                assert s.for_each is not None, s
                assert 'var.ocr_api_key_secret_arn != ""' in s.for_each, s
                assert 'var.ocr_api_key_secret_kms_key_arn != ""' in s.for_each, s
                assert "||" not in s.for_each, s
                found.append(s)
    assert len(found) == 1, found


def test_the_ocr_key_is_never_in_a_functions_environment(infra: Infra) -> None:
    """ingest is told where the key is (the secret's ARN, for the chosen provider only), never
    the key: no *_API_KEY or *_API_KEY_FILE anywhere in the functions' environment."""
    ocr = infra.locals["ocr_environment"]
    assert ocr["NIB_OCR"] == "${var.ocr_provider}"
    assert ocr["NIB_OCR_OPENAI_API_KEY_SECRET"] == (
        '${var.ocr_provider == "openai" ? var.ocr_api_key_secret_arn : ""}'
    )
    assert ocr["NIB_OCR_GOOGLE_API_KEY_SECRET"] == (
        '${var.ocr_provider == "google-vision" ? var.ocr_api_key_secret_arn : ""}'
    )
    environments = [infra.locals["common_environment"], ocr] + [
        env for env in infra.locals["extra_environment"].values() if isinstance(env, dict)
    ]
    for env in environments:
        for name in env:
            assert not name.endswith(("_API_KEY", "_API_KEY_FILE")), name
    # ingest's environment is that map without its empty values; no other function's holds any
    # of it.
    extra = infra.locals["extra_environment"]
    assert extra["ingest"] == (
        '${{for name, value in local.ocr_environment : name => value if value != ""}}'
    )
    for fn, env in extra.items():
        if fn != "ingest":
            assert not any(name.startswith("NIB_OCR") for name in env), fn


def test_ingest_runs_textract_within_lambdas_limit(infra: Infra) -> None:
    ingest = infra.locals["default_settings"]["ingest"]
    # One synchronous Textract call per page: a long notebook needs the full 15 minutes.
    assert ingest["timeout_seconds"] == 900
    assert ingest["memory_mb"] >= 1024
    # Textract unless the operator chooses a provider of their own.
    assert infra.locals["ocr_environment"]["NIB_OCR"] == "${var.ocr_provider}"
    assert infra.variables["ocr_provider"]["default"] == "textract"
    for fn, env in infra.locals["extra_environment"].items():
        if fn != "ingest":
            assert "NIB_OCR" not in env, fn
    assert "NIB_OCR" not in infra.locals["common_environment"]


def test_each_role_writes_only_its_own_log_group(role_statements) -> None:
    for fn, stmts in role_statements.items():
        for s in stmts:
            if s.touches("logs"):
                assert set(s.actions) == {"logs:CreateLogStream", "logs:PutLogEvents"}, s
                assert s.resources == ["${aws_cloudwatch_log_group.fn[each.key].arn}:*"], s


# ---------------------------------------------------------------------------------------------
# Functions


def test_functions_are_arm64_al2023_with_log_groups(infra: Infra) -> None:
    fn = infra.resource("aws_lambda_function", "fn")
    assert fn["for_each"] == "${local.functions}"
    assert fn["runtime"] == "provided.al2023"
    assert fn["architectures"] == ["arm64"]
    assert fn["handler"] == "bootstrap"
    for setting in ("memory_size", "timeout", "reserved_concurrent_executions"):
        assert setting in fn, setting
    assert "${aws_cloudwatch_log_group.fn}" in fn["depends_on"]

    logs = infra.resource("aws_cloudwatch_log_group", "fn")
    assert logs["for_each"] == "${local.functions}"
    assert logs["name"] == "/aws/lambda/${each.value.function_name}"
    assert logs["retention_in_days"] == "${var.log_retention_days}"
    assert infra.variables["log_retention_days"]["default"] > 0


def test_every_function_reads_the_search_model_from_the_layer_make_lambdas_packs(infra: Infra) -> None:
    """The functions are built without the model (`make lambdas`: NIB_EMBED_MODEL_LAYER) and
    read it at the path the layer puts it; the layer's zip is the one the Makefile writes."""
    fn = infra.resource("aws_lambda_function", "fn")
    assert fn["layers"] == ["${aws_lambda_layer_version.embed.arn}"]
    layer = infra.resource("aws_lambda_layer_version", "embed")
    assert layer["filename"] == "${local.embed_layer_zip}"
    assert layer["source_code_hash"] == "${filebase64sha256(local.embed_layer_zip)}"
    assert layer["compatible_architectures"] == fn["architectures"]
    assert layer["compatible_runtimes"] == [fn["runtime"]]
    assert infra.locals["embed_layer_zip"] == "${path.module}/${var.lambda_artifacts_dir}/embed-layer.zip"
    makefile = (INFRA.parent / "Makefile").read_text()
    path = re.search(r"^LAMBDA_MODEL_PATH := (\S+)$", makefile, re.M)
    assert path and path.group(1) == "/opt/nib/embed.nibm", "the layer's nib/ lands in /opt"
    assert 'ZipInfo("nib/embed.nibm"' in makefile and "target/lambda/embed-layer.zip" in makefile


def test_every_function_has_settings(infra: Infra) -> None:
    for name, s in infra.locals["default_settings"].items():
        assert s["memory_mb"] >= 128 and s["timeout_seconds"] >= 1, name
        assert "reserved_concurrency" in s, name
    settings = infra.locals["default_settings"]
    # API Gateway gives up at 30 s: mcp answers before that, the class functions before mcp.
    assert settings["mcp"]["timeout_seconds"] < 30
    for name in ("pages", "tasks"):
        assert settings[name]["timeout_seconds"] < settings["mcp"]["timeout_seconds"]
    # A deletion the front stops waiting for still runs to its end.
    assert settings["account"]["timeout_seconds"] > settings["mcp"]["timeout_seconds"]


def test_environment_names_the_rust_side_reads(infra: Infra) -> None:
    common = set(infra.locals["common_environment"])
    assert common == {"NIB_TABLE", "NIB_BUCKET", "NIB_KMS_KEY_ID", "NIB_ASSET_TTL_SECONDS",
                      "NIB_PUBLIC_URL", "RUST_LOG", "NIB_LOG_FORMAT"}
    assert infra.locals["common_environment"]["NIB_LOG_FORMAT"] == "json"
    extra = infra.locals["extra_environment"]
    assert set(extra) == FUNCTIONS
    assert {"NIB_PAGES_FUNCTION", "NIB_TASKS_FUNCTION", "NIB_ACCOUNT_FUNCTION",
            "NIB_SIGNING_KEY_ID", "NIB_SIGNING_PUBLIC_KEY",
            "NIB_UPLOAD_ROLE_ARN"} <= set(extra["mcp"])
    assert extra["mcp"]["NIB_UPLOAD_ROLE_ARN"] == "${aws_iam_role.uploads.arn}"
    for fn, env in extra.items():
        if fn != "mcp":
            assert "NIB_UPLOAD_ROLE_ARN" not in env, fn
    assert extra["account"] == {}
    assert {"NIB_SIGNING_KEY_ID", "NIB_SIGNING_PUBLIC_KEY"} <= set(extra["oauth"])


# ---------------------------------------------------------------------------------------------
# DynamoDB table


def test_table_shape_and_protection(infra: Infra) -> None:
    table = infra.resource("aws_dynamodb_table", "main")
    assert table["billing_mode"] == "PAY_PER_REQUEST"
    assert (table["hash_key"], table["range_key"]) == ("pk", "sk")
    attributes = {a["name"]: a["type"] for a in as_list(table["attribute"])}
    assert attributes == {"pk": "S", "sk": "S", "gsi1pk": "S", "gsi1sk": "S"}
    gsi = as_list(table["global_secondary_index"])
    assert [(g["name"], g["hash_key"], g["range_key"], g["projection_type"]) for g in gsi] == [
        ("gsi1", "gsi1pk", "gsi1sk", "ALL")
    ]
    ttl = as_list(table["ttl"])[0]
    assert ttl == {"attribute_name": "expires_at", "enabled": True}
    assert as_list(table["point_in_time_recovery"])[0]["enabled"] is True
    sse = as_list(table["server_side_encryption"])[0]
    assert sse["enabled"] is True and sse["kms_key_arn"] == "${aws_kms_key.storage.arn}"
    assert table["deletion_protection_enabled"] is True


# ---------------------------------------------------------------------------------------------
# API and outputs


def test_api_routes_and_stage(infra: Infra) -> None:
    routes = infra.locals["routes"]
    for method in ("POST", "GET", "DELETE"):
        assert routes[f"{method} /mcp"] == "mcp"
    # Page links are shown by the front (it reads the page through the pages function); the
    # sign-in they need is under /oauth/, the authorization server's.
    assert routes["GET /pages/{proxy+}"] == "mcp"
    assert routes["GET /oauth/{proxy+}"] == routes["POST /oauth/{proxy+}"] == "oauth"
    for doc in ("oauth-protected-resource", "oauth-protected-resource/mcp",
                "oauth-authorization-server", "openid-configuration"):
        assert routes[f"GET /.well-known/{doc}"] == "oauth"
    assert set(routes.values()) == {"mcp", "oauth"}

    integration = infra.resource("aws_apigatewayv2_integration", "fn")
    assert integration["integration_type"] == "AWS_PROXY"
    assert integration["payload_format_version"] == "2.0"

    stage = infra.resource("aws_apigatewayv2_stage", "default")
    throttle = as_list(stage["default_route_settings"])[0]
    assert throttle["throttling_burst_limit"] == "${var.throttling_burst_limit}"
    assert throttle["throttling_rate_limit"] == "${var.throttling_rate_limit}"
    assert as_list(stage["access_log_settings"])[0]["destination_arn"] == (
        "${aws_cloudwatch_log_group.api.arn}"
    )


def test_outputs_include_the_connector_url(infra: Infra) -> None:
    assert infra.outputs["connector_url"]["value"] == "${local.public_url}/mcp"
    for name in ("api_endpoint", "table_name", "bucket_name", "function_names"):
        assert name in infra.outputs, name


# ---------------------------------------------------------------------------------------------
# Every checkov skip says why


def test_every_checkov_skip_has_a_reason() -> None:
    for path in sorted(INFRA.glob("*.tf")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if "checkov:skip" in line:
                m = re.search(r"#checkov:skip=(CKV2?_AWS_\d+):(.*)", line)
                assert m and len(m.group(2).strip()) >= 40, f"{path.name}:{n}: skip without a reason"


def test_the_readme_claims_what_the_key_policy_allows(infra: Infra) -> None:
    """The security notes may not promise more than the policies give: while the account root
    keeps kms:PutKeyPolicy, administrators can rewrite the data key's policy, and while the
    class functions trust their payload, any account principal that may invoke them can act as
    any user. The README must say both, not that administrators cannot use the key."""
    readme = (INFRA / "README.md").read_text()
    admin_actions = [str(a) for a in as_list(infra.locals["kms_admin_actions"])]
    if "kms:PutKeyPolicy" in admin_actions:
        assert "PutKeyPolicy" in readme, "the README must say the key policy can be rewritten"
        assert "cannot use it, and" not in readme, "an overstated claim is back"
    assert "within this stack" in readme and "lambda:InvokeFunction" in readme


# ---------------------------------------------------------------------------------------------
# The operator policy (infra/operator.tf): what nib's admin commands use, nothing more

OPERATOR_PARTITIONS = {"U#*", "USERS", "TOK#*", "CLIENT#*", "GRANT#*", "RT#*", "USER#*", "SESSION#*"}


def test_the_operator_policy_is_a_managed_policy_of_its_document(infra: Infra) -> None:
    policy = infra.resource("aws_iam_policy", "operator")
    assert policy["policy"] == "${data.aws_iam_policy_document.operator.json}"
    assert "operator_policy_arn" in infra.outputs and "region" in infra.outputs


def test_the_operator_reaches_only_its_partitions_and_never_a_secret_or_a_scan(
    infra: Infra,
) -> None:
    for s in statements(infra, "operator"):
        assert s.effect == "Allow" and not any(a.endswith("*") and a.startswith("dynamodb") for a in s.actions), s
        if not s.touches("dynamodb"):
            continue
        assert "dynamodb:Scan" not in s.actions, s
        keys = s.condition("ForAllValues:StringLike", "dynamodb:LeadingKeys")
        if keys is None:
            assert set(s.actions) <= {"dynamodb:DescribeTable", "dynamodb:DescribeTimeToLive"}, s
            continue
        assert set(keys) == OPERATOR_PARTITIONS, s
        assert not any(k.startswith("SECRET#") for k in keys), s


def test_the_operator_uses_the_data_key_only_under_the_user_context(infra: Infra) -> None:
    data_key = [s for s in statements(infra, "operator") if s.on("aws_kms_key.data")]
    assert data_key, "the operator needs the data key to import and read pages"
    for s in data_key:
        assert set(s.actions) <= DATA_KEY_ACTIONS, s
        assert_user_context(s)
    for s in statements(infra, "operator"):
        if s.on("aws_kms_key.storage"):
            assert s.condition("StringEquals", "kms:ViaService"), s
        assert not s.on("aws_kms_key.signing"), s
        assert "lambda:InvokeFunction" not in s.actions and not s.touches("textract"), s


def test_the_operator_reaches_only_page_images_and_uploads(infra: Infra) -> None:
    for s in statements(infra, "operator"):
        if not s.touches("s3"):
            continue
        objects = [a for a in s.actions if a.endswith(("Object", "ObjectVersion"))]
        if objects:
            if any("export" in r for r in s.resources):
                # `nib user delete` deletes a user's exports, and does nothing else with them.
                assert set(s.actions) == {"s3:DeleteObject", "s3:DeleteObjectVersion"}, s
                assert all(r.endswith("/exports/*") or "export_objects" in r
                           for r in s.resources), s
                continue
            assert s.resources and all(r.endswith(("/u/*", "/uploads/*")) or "pages_objects" in r or "upload_objects" in r for r in s.resources), s
        elif s.actions == ["s3:ListBucketVersions"]:
            # `nib user delete` lists a user's objects: only under u/, uploads/ and exports/.
            assert set(s.condition("StringLike", "s3:prefix") or []) == {
                "u/*", "uploads/*", "exports/*"}, s
        else:
            assert all(a.startswith("s3:Get") for a in s.actions), s


def test_the_data_key_admits_an_operator_only_when_listed(infra: Infra) -> None:
    variable = infra.variables["operator_role_arns"]
    assert variable["default"] == [], "no operator by default"
    users = [s for s in statements(infra, "data_key_policy") if s.where.endswith("/UserDataKeys")]
    assert len(users) == 1
    principals = " ".join(str(i) for _, ids in users[0].principals for i in ids)
    assert "var.operator_role_arns" in principals
    assert_user_context(users[0])
