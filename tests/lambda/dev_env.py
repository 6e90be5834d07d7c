#!/usr/bin/env python3
"""A local stand-in for the deployment's AWS resources, for `make lambda-watch`.

Creates on moto's server at ENDPOINT what infra/ creates on AWS (the table with its index and
TTL, the bucket named in tests/data/lambda/s3-object-created.json, the data key and the
ECC_NIST_P256 signing key), uploads one sample page under uploads/default/ for
`make invoke-ingest`, and writes the functions' environment (what infra/locals.tf sets) to
OUT, for `cargo lambda watch --env-file OUT`. Idempotent: existing resources are reused.
"""

import argparse
import os

import boto3

BUCKET = "nib-pages-123456789012"  # the fixture's bucket
TABLE = "nib"
PUBLIC_URL = "https://abc123def4.execute-api.eu-west-1.amazonaws.com"  # the fixtures' host


UPLOAD_ROLE_ARN = "arn:aws:iam::123456789012:role/nib-uploads-role"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", default="http://127.0.0.1:5000")
    ap.add_argument("--invoke-port", default="9000")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    session = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing",
                                    region_name="us-east-1")
    ddb = session.client("dynamodb", endpoint_url=args.endpoint)
    s3 = session.client("s3", endpoint_url=args.endpoint)
    kms = session.client("kms", endpoint_url=args.endpoint)

    if TABLE not in ddb.list_tables()["TableNames"]:
        s = lambda n: {"AttributeName": n, "AttributeType": "S"}
        k = lambda n, t: {"AttributeName": n, "KeyType": t}
        ddb.create_table(
            TableName=TABLE, BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[s("pk"), s("sk"), s("gsi1pk"), s("gsi1sk")],
            KeySchema=[k("pk", "HASH"), k("sk", "RANGE")],
            GlobalSecondaryIndexes=[{"IndexName": "gsi1", "Projection": {"ProjectionType": "ALL"},
                                     "KeySchema": [k("gsi1pk", "HASH"), k("gsi1sk", "RANGE")]}])
        ddb.update_time_to_live(TableName=TABLE, TimeToLiveSpecification={
            "Enabled": True, "AttributeName": "expires_at"})
    if BUCKET not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
        s3.create_bucket(Bucket=BUCKET)
    sample = os.path.join(os.path.dirname(__file__), "..", "data", "sample", "2026-06-19.md")
    with open(sample, "rb") as f:
        s3.put_object(Bucket=BUCKET, Key="uploads/default/2026-06-19.md", Body=f.read())

    keys = {}
    for alias, spec in (("alias/nib-data", None), ("alias/nib-signing", "ECC_NIST_P256")):
        existing = [a for a in kms.list_aliases()["Aliases"] if a["AliasName"] == alias]
        if existing:
            key_id = existing[0]["TargetKeyId"]
        else:
            extra = {"KeySpec": spec, "KeyUsage": "SIGN_VERIFY"} if spec else {}
            key_id = kms.create_key(Description=f"nib local {alias}", **extra)["KeyMetadata"]["KeyId"]
            kms.create_alias(AliasName=alias, TargetKeyId=key_id)
        keys[alias] = kms.describe_key(KeyId=key_id)["KeyMetadata"]["Arn"]
    der = kms.get_public_key(KeyId=keys["alias/nib-signing"])["PublicKey"]
    import base64
    b64 = base64.b64encode(der).decode()
    pem = "-----BEGIN PUBLIC KEY-----\\n" + "\\n".join(
        b64[i:i + 64] for i in range(0, len(b64), 64)) + "\\n-----END PUBLIC KEY-----\\n"

    env = {
        "AWS_ENDPOINT_URL": args.endpoint,
        "AWS_ENDPOINT_URL_LAMBDA": f"http://127.0.0.1:{args.invoke_port}",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "NIB_TABLE": TABLE,
        "NIB_BUCKET": BUCKET,
        "NIB_KMS_KEY_ID": keys["alias/nib-data"],
        "NIB_SIGNING_KEY_ID": keys["alias/nib-signing"],
        "NIB_SIGNING_PUBLIC_KEY": pem,
        "NIB_PUBLIC_URL": PUBLIC_URL,
        "NIB_PAGES_FUNCTION": "pages",
        "NIB_TASKS_FUNCTION": "tasks",
        "NIB_ACCOUNT_FUNCTION": "account",
        # moto's STS assumes any role ARN (and enforces no session policy).
        "NIB_UPLOAD_ROLE_ARN": UPLOAD_ROLE_ARN,
        "RUST_LOG": "info",
    }
    with open(args.out, "w") as f:
        for k, v in env.items():
            f.write(f'{k}="{v}"\n')  # quoted: the PEM has spaces (\n stays two characters)
    print(f"lambda-watch: resources on {args.endpoint}, environment in {args.out}")


if __name__ == "__main__":
    main()
