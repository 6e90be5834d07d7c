//! `DynamoStore`: the `Store` port over one DynamoDB table (docs/design.md §5).
//!
//! # Attribute layout
//!
//! | attribute | type | holds |
//! |---|---|---|
//! | `pk`, `sk` | S | the table key |
//! | `gsi1pk`, `gsi1sk` | S | the key in index `gsi1` (projection ALL); absent when not indexed |
//! | `version` | N | optimistic concurrency |
//! | `expires_at` | N | unix seconds; the table's TTL attribute; absent when the item does not expire |
//! | `body` | B | the record, opaque to the store (sealed fields are already ciphertext) |
//! | `count` | N | counters only (`increment`), instead of `body`; read back as an 8-byte big-endian body, as the embedded store stores it |
//!
//! # How the port maps onto DynamoDB
//!
//! - **Conditions** become condition expressions evaluated by DynamoDB, with expired items
//!   treated as absent (TTL deletion is lazy): `NotExists` is `attribute_not_exists(pk) OR
//!   expires_at <= :now`, `Exists` and `Version` also require `expires_at` to be absent or
//!   in the future.
//! - **One write** is a `PutItem` or `DeleteItem` with its condition (one request, half the
//!   write cost of a transaction); a failed condition is `ConditionFailed { index: 0 }`.
//! - **Several writes** (or a lone `Check`) are one `TransactWriteItems` with a client request
//!   token, so the SDK's retries of it are idempotent. A cancellation maps its reasons: the
//!   first `ConditionalCheckFailed` gives `ConditionFailed { index }`, otherwise a
//!   `TransactionConflict` gives `Conflict`.
//! - **Queries** use a key condition (`begins_with` for a bare prefix, else `BETWEEN`, `>=` or
//!   `<=` on the tightest bounds that prefix, `from` and `to` allow), `ScanIndexForward` for the
//!   order, `Limit` for the page size and a filter expression for expiry. DynamoDB allows one
//!   sort-key condition, so a prefix combined with bounds ranges up to the prefix's successor and
//!   the one key equal to that successor, if any, is dropped here. The cursor is the base64url of
//!   the JSON of `LastEvaluatedKey`, checked against the query's partition when it comes back.
//! - **Reads** of the table are strongly consistent (`GetItem`, `BatchGetItem`, table
//!   queries), as the embedded store's are; index queries cannot be and are eventually
//!   consistent.
//! - **`batch_get`** removes repeated keys, asks in chunks of 100 concurrently, retries
//!   `UnprocessedKeys` with backoff, and answers in the order asked.
//! - **`increment`** is one `UpdateItem` (`ADD count, version SET expires_at`, returning the new item) conditioned on
//!   the counter being absent or live; when it is expired, a second conditional `UpdateItem`
//!   starts it over.
//!
//! Nothing here scans the table.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Delete, KeysAndAttributes, Put, ReturnValue, TransactWriteItem,
    Update,
};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as CURSOR;

use crate::ports::{
    Clock, Cond, Index, Item, Query, QueryPage, Store, StoreError, SystemClock, Write,
};

/// The name of the secondary index.
pub const GSI1: &str = "gsi1";

const PK: &str = "pk";
const SK: &str = "sk";
const GSI1PK: &str = "gsi1pk";
const GSI1SK: &str = "gsi1sk";
const VERSION: &str = "version";
const EXPIRES_AT: &str = "expires_at";
const BODY: &str = "body";
const COUNT: &str = "count";

/// DynamoDB's limit on the keys of one `BatchGetItem`.
const BATCH_GET_KEYS: usize = 100;
/// Rounds of `UnprocessedKeys` retries before `batch_get` gives up.
const BATCH_GET_ATTEMPTS: u32 = 8;
/// Rounds of the two-step `increment` (add, or restart an expired counter) before giving up.
const INCREMENT_ATTEMPTS: usize = 8;

/// The store over one table, through a shared SDK client. Cheap to clone.
#[derive(Clone)]
pub struct DynamoStore {
    client: Client,
    table: String,
    /// The time expiry is judged by ([`crate::ports::is_live`]): the `:now` of conditions and
    /// filters, and the check on items read back.
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for DynamoStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynamoStore")
            .field("table", &self.table)
            .finish_non_exhaustive()
    }
}

impl DynamoStore {
    pub fn new(client: Client, table: impl Into<String>) -> DynamoStore {
        DynamoStore {
            client,
            table: table.into(),
            clock: Arc::new(SystemClock),
        }
    }

    /// The same store, judging expiry by `clock` (the system clock by default).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> DynamoStore {
        self.clock = clock;
        self
    }

    pub fn table(&self) -> &str {
        &self.table
    }
}

// ---- Errors ---------------------------------------------------------------------------------

fn invalid(msg: impl Into<String>) -> StoreError {
    StoreError::Invalid(msg.into())
}

fn unavailable(e: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::Unavailable(Box::new(e))
}

/// A stored item that does not have our layout: the table is damaged or not ours.
fn corrupt(what: &str) -> StoreError {
    StoreError::Unavailable(format!("malformed item in the table: {what}").into())
}

/// The error code DynamoDB sent, when the service answered at all.
fn service_code<E, R>(e: &SdkError<E, R>) -> Option<&str>
where
    E: aws_sdk_dynamodb::error::ProvideErrorMetadata,
{
    match e {
        SdkError::ServiceError(s) => s.err().code(),
        _ => None,
    }
}

/// Maps the failure of a single conditional write or update.
fn write_error<E, R>(e: SdkError<E, R>) -> StoreError
where
    E: aws_sdk_dynamodb::error::ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    match service_code(&e) {
        Some("ConditionalCheckFailedException") => StoreError::ConditionFailed { index: 0 },
        Some("TransactionConflictException") => StoreError::Conflict,
        Some("ValidationException") => invalid(validation_message(&e)),
        _ => unavailable(e),
    }
}

/// Maps the failure of a read.
fn read_error<E, R>(e: SdkError<E, R>) -> StoreError
where
    E: aws_sdk_dynamodb::error::ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    match service_code(&e) {
        Some("ValidationException") => invalid(validation_message(&e)),
        _ => unavailable(e),
    }
}

fn validation_message<E, R>(e: &SdkError<E, R>) -> String
where
    E: aws_sdk_dynamodb::error::ProvideErrorMetadata,
{
    match e {
        SdkError::ServiceError(s) => s
            .err()
            .message()
            .unwrap_or("DynamoDB refused the request")
            .to_owned(),
        _ => "DynamoDB refused the request".to_owned(),
    }
}

// ---- Items ----------------------------------------------------------------------------------

/// The port's one expiry rule ([`crate::ports::is_live`]), which the condition expressions
/// below spell in DynamoDB's terms (`#exp > :now` live, `#exp <= :now` gone).
fn is_live(item: &Item, now: i64) -> bool {
    item.is_live(now)
}

fn s(value: &str) -> AttributeValue {
    AttributeValue::S(value.to_owned())
}

fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

fn key(pk: &str, sk: &str) -> HashMap<String, AttributeValue> {
    HashMap::from([(PK.to_owned(), s(pk)), (SK.to_owned(), s(sk))])
}

fn to_attributes(item: &Item) -> HashMap<String, AttributeValue> {
    let mut attrs = key(&item.pk, &item.sk);
    if let Some((gpk, gsk)) = &item.gsi1 {
        attrs.insert(GSI1PK.to_owned(), s(gpk));
        attrs.insert(GSI1SK.to_owned(), s(gsk));
    }
    attrs.insert(VERSION.to_owned(), n(item.version));
    if let Some(at) = item.expires_at {
        attrs.insert(EXPIRES_AT.to_owned(), n(at));
    }
    attrs.insert(
        BODY.to_owned(),
        AttributeValue::B(Blob::new(item.body.clone())),
    );
    attrs
}

fn string_attr(attrs: &HashMap<String, AttributeValue>, name: &str) -> Option<String> {
    match attrs.get(name) {
        Some(AttributeValue::S(v)) => Some(v.clone()),
        _ => None,
    }
}

fn number_attr<T: std::str::FromStr>(
    attrs: &HashMap<String, AttributeValue>,
    name: &str,
) -> Result<Option<T>, StoreError> {
    match attrs.get(name) {
        None => Ok(None),
        Some(AttributeValue::N(v)) => v.parse().map(Some).map_err(|_| corrupt(name)),
        Some(_) => Err(corrupt(name)),
    }
}

fn from_attributes(attrs: &HashMap<String, AttributeValue>) -> Result<Item, StoreError> {
    let pk = string_attr(attrs, PK).ok_or_else(|| corrupt(PK))?;
    let sk = string_attr(attrs, SK).ok_or_else(|| corrupt(SK))?;
    let gsi1 = match (string_attr(attrs, GSI1PK), string_attr(attrs, GSI1SK)) {
        (Some(gpk), Some(gsk)) => Some((gpk, gsk)),
        (None, None) => None,
        _ => return Err(corrupt("half a gsi1 key")),
    };
    let body = match attrs.get(BODY) {
        Some(AttributeValue::B(b)) => b.as_ref().to_vec(),
        Some(_) => return Err(corrupt(BODY)),
        // A counter: its count is the body, as the embedded store keeps it.
        None => match number_attr::<u64>(attrs, COUNT)? {
            Some(count) => count.to_be_bytes().to_vec(),
            None => return Err(corrupt("neither body nor count")),
        },
    };
    Ok(Item {
        pk,
        sk,
        gsi1,
        version: number_attr(attrs, VERSION)?.ok_or_else(|| corrupt(VERSION))?,
        expires_at: number_attr(attrs, EXPIRES_AT)?,
        body,
    })
}

// ---- Expressions ----------------------------------------------------------------------------

/// A condition or key expression with the names and values it uses (DynamoDB refuses unused
/// ones, so each expression carries exactly its own).
#[derive(Debug, Default)]
struct Expr {
    text: String,
    names: HashMap<String, String>,
    values: HashMap<String, AttributeValue>,
}

impl Expr {
    fn name(&mut self, placeholder: &str, attribute: &str) -> &mut Self {
        self.names
            .insert(placeholder.to_owned(), attribute.to_owned());
        self
    }

    fn value(&mut self, placeholder: &str, value: AttributeValue) -> &mut Self {
        self.values.insert(placeholder.to_owned(), value);
        self
    }

    fn names(&self) -> Option<HashMap<String, String>> {
        (!self.names.is_empty()).then(|| self.names.clone())
    }

    fn values(&self) -> Option<HashMap<String, AttributeValue>> {
        (!self.values.is_empty()).then(|| self.values.clone())
    }
}

/// The condition expression of `cond` at time `now`, or `None` for `Cond::None`. Expired
/// items count as absent, as everywhere in the port.
fn condition(cond: Cond, now: i64) -> Option<Expr> {
    let mut e = Expr::default();
    match cond {
        Cond::None => return None,
        Cond::NotExists => {
            e.text = "attribute_not_exists(#pk) OR #exp <= :now".into();
            e.name("#pk", PK);
        }
        Cond::Exists => {
            e.text = "attribute_exists(#pk) AND (attribute_not_exists(#exp) OR #exp > :now)".into();
            e.name("#pk", PK);
        }
        Cond::Version(v) => {
            e.text = "#ver = :ver AND (attribute_not_exists(#exp) OR #exp > :now)".into();
            e.name("#ver", VERSION).value(":ver", n(v));
        }
    }
    e.name("#exp", EXPIRES_AT).value(":now", n(now));
    Some(e)
}

/// The smallest string greater than every string that starts with `prefix`, if there is one:
/// the prefix with its last character incremented (trailing `char::MAX`es dropped). UTF-8 byte
/// order, which DynamoDB uses, is code point order, so this holds for DynamoDB's comparisons.
fn prefix_successor(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        let next = match last as u32 {
            0xD7FF => Some('\u{E000}'),
            c => char::from_u32(c + 1),
        };
        if let Some(next) = next {
            chars.push(next);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

/// The upper end of a sort-key range.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Upper {
    Inclusive(String),
    /// Only from a prefix's successor.
    Exclusive(String),
}

/// The sort keys a query covers: `lower <= key`, below `upper`, starting with `prefix`.
#[derive(Debug)]
struct SortRange<'q> {
    prefix: &'q str,
    lower: Option<String>,
    upper: Option<Upper>,
}

impl SortRange<'_> {
    fn of(q: &Query) -> SortRange<'_> {
        let mut lower = (!q.prefix.is_empty()).then(|| q.prefix.clone());
        if let Some(from) = q.from.as_ref().filter(|f| !f.is_empty()) {
            lower = Some(lower.map_or_else(|| from.clone(), |l| l.max(from.clone())));
        }
        let prefix_end = if q.prefix.is_empty() {
            None
        } else {
            prefix_successor(&q.prefix)
        };
        let upper = match (q.to.clone(), prefix_end) {
            (Some(to), Some(end)) if to >= end => Some(Upper::Exclusive(end)),
            (Some(to), _) => Some(Upper::Inclusive(to)),
            (None, end) => end.map(Upper::Exclusive),
        };
        SortRange {
            prefix: &q.prefix,
            lower,
            upper,
        }
    }

    fn is_empty(&self) -> bool {
        match (&self.lower, &self.upper) {
            (_, Some(Upper::Inclusive(hi))) if hi.is_empty() => true,
            (Some(lo), Some(Upper::Inclusive(hi))) => lo > hi,
            (Some(lo), Some(Upper::Exclusive(hi))) => lo >= hi,
            _ => false,
        }
    }

    fn contains(&self, key: &str) -> bool {
        key.starts_with(self.prefix)
            && self.lower.as_deref().is_none_or(|lo| key >= lo)
            && match &self.upper {
                None => true,
                Some(Upper::Inclusive(hi)) => key <= hi.as_str(),
                Some(Upper::Exclusive(hi)) => key < hi.as_str(),
            }
    }

    /// The key condition: the partition and at most one sort-key condition. A bare prefix is
    /// `begins_with`; anything with bounds is the closed range around it (an exclusive upper
    /// end is asked inclusively and its one key dropped by `contains`).
    fn key_condition(&self, partition_attr: &str, sort_attr: &str, partition: &str) -> Expr {
        let mut e = Expr::default();
        e.name("#p", partition_attr).value(":p", s(partition));
        let bare_prefix = !self.prefix.is_empty()
            && self.lower.as_deref() == Some(self.prefix)
            && matches!(&self.upper, Some(Upper::Exclusive(_)) | None);
        let upper = self.upper.as_ref().map(|u| match u {
            Upper::Inclusive(hi) | Upper::Exclusive(hi) => hi.clone(),
        });
        let sort = if bare_prefix {
            e.value(":pre", s(self.prefix));
            Some("begins_with(#s, :pre)")
        } else {
            match (&self.lower, upper) {
                (Some(lo), Some(hi)) => {
                    e.value(":lo", s(lo)).value(":hi", AttributeValue::S(hi));
                    Some("#s BETWEEN :lo AND :hi")
                }
                (Some(lo), None) => {
                    e.value(":lo", s(lo));
                    Some("#s >= :lo")
                }
                (None, Some(hi)) => {
                    e.value(":hi", AttributeValue::S(hi));
                    Some("#s <= :hi")
                }
                (None, None) => None,
            }
        };
        e.text = match sort {
            Some(sort) => {
                e.name("#s", sort_attr);
                format!("#p = :p AND {sort}")
            }
            None => "#p = :p".to_owned(),
        };
        e
    }
}

// ---- Cursors --------------------------------------------------------------------------------

/// The key attributes a cursor of this index holds.
fn cursor_attributes(index: Index) -> &'static [&'static str] {
    match index {
        Index::Table => &[PK, SK],
        Index::Gsi1 => &[PK, SK, GSI1PK, GSI1SK],
    }
}

fn encode_cursor(key: &HashMap<String, AttributeValue>) -> Result<String, StoreError> {
    let mut map = serde_json::Map::new();
    for (name, value) in key {
        let AttributeValue::S(v) = value else {
            return Err(corrupt("a non-string key in LastEvaluatedKey"));
        };
        map.insert(name.clone(), serde_json::Value::String(v.clone()));
    }
    let json = serde_json::to_vec(&map).expect("a map of strings serializes");
    Ok(CURSOR.encode(json))
}

/// Turns a cursor back into `ExclusiveStartKey`, refusing anything this store did not hand out
/// for this index and partition.
fn decode_cursor(cursor: &str, q: &Query) -> Result<HashMap<String, AttributeValue>, StoreError> {
    let refused = || invalid("query cursor is not one this store returned");
    let json = CURSOR.decode(cursor).map_err(|_| refused())?;
    let map: HashMap<String, String> = serde_json::from_slice(&json).map_err(|_| refused())?;
    let wanted = cursor_attributes(q.index);
    if map.len() != wanted.len()
        || !wanted
            .iter()
            .all(|name| map.get(*name).is_some_and(|v| !v.is_empty()))
    {
        return Err(refused());
    }
    let partition_attr = match q.index {
        Index::Table => PK,
        Index::Gsi1 => GSI1PK,
    };
    if map[partition_attr] != q.partition {
        return Err(refused());
    }
    Ok(map
        .into_iter()
        .map(|(name, value)| (name, AttributeValue::S(value)))
        .collect())
}

// ---- Validation -----------------------------------------------------------------------------

/// A short, growing, jittered pause between retries of unprocessed keys.
async fn backoff(attempt: u32) {
    let cap_ms = (25u64 << attempt.min(6)).min(1000);
    let ms = cap_ms / 2 + rand::random::<u64>() % (cap_ms / 2 + 1);
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

/// `Write::Add` as an update: `ADD` to the count and the version; when subtracting, on the
/// condition that the count stays at or above 0.
struct AddExpr {
    condition: Option<String>,
    values: HashMap<String, AttributeValue>,
}

impl AddExpr {
    const UPDATE: &'static str = "ADD #cnt :by, #ver :one";

    fn new(by: i64) -> AddExpr {
        let mut values = HashMap::from([(":by".to_owned(), n(by)), (":one".to_owned(), n(1))]);
        let condition = (by < 0).then(|| {
            values.insert(":least".to_owned(), n(by.unsigned_abs()));
            "#cnt >= :least".to_owned()
        });
        AddExpr { condition, values }
    }

    fn names(&self) -> HashMap<String, String> {
        HashMap::from([
            ("#cnt".to_owned(), COUNT.to_owned()),
            ("#ver".to_owned(), VERSION.to_owned()),
        ])
    }
}

// ---- The port -------------------------------------------------------------------------------

impl DynamoStore {
    /// One `PutItem` or `DeleteItem` with its condition.
    async fn write_one(&self, write: Write, now: i64) -> Result<(), StoreError> {
        match write {
            Write::Put { item, cond } => {
                let cond = condition(cond, now);
                self.client
                    .put_item()
                    .table_name(&self.table)
                    .set_item(Some(to_attributes(&item)))
                    .set_condition_expression(cond.as_ref().map(|c| c.text.clone()))
                    .set_expression_attribute_names(cond.as_ref().and_then(Expr::names))
                    .set_expression_attribute_values(cond.as_ref().and_then(Expr::values))
                    .send()
                    .await
                    .map_err(write_error)?;
            }
            Write::Delete { pk, sk, cond } => {
                let cond = condition(cond, now);
                self.client
                    .delete_item()
                    .table_name(&self.table)
                    .set_key(Some(key(&pk, &sk)))
                    .set_condition_expression(cond.as_ref().map(|c| c.text.clone()))
                    .set_expression_attribute_names(cond.as_ref().and_then(Expr::names))
                    .set_expression_attribute_values(cond.as_ref().and_then(Expr::values))
                    .send()
                    .await
                    .map_err(write_error)?;
            }
            Write::Add { pk, sk, by } => {
                let add = AddExpr::new(by);
                self.client
                    .update_item()
                    .table_name(&self.table)
                    .set_key(Some(key(&pk, &sk)))
                    .update_expression(AddExpr::UPDATE)
                    .set_condition_expression(add.condition.clone())
                    .set_expression_attribute_names(Some(add.names()))
                    .set_expression_attribute_values(Some(add.values))
                    .send()
                    .await
                    .map_err(write_error)?;
            }
            Write::Check { .. } => unreachable!("a lone check goes through a transaction"),
        }
        Ok(())
    }

    fn transact_item(&self, write: Write, now: i64) -> Result<TransactWriteItem, StoreError> {
        let built = |e: aws_sdk_dynamodb::error::BuildError| invalid(e.to_string());
        Ok(match write {
            Write::Put { item, cond } => {
                let cond = condition(cond, now);
                let put = Put::builder()
                    .table_name(&self.table)
                    .set_item(Some(to_attributes(&item)))
                    .set_condition_expression(cond.as_ref().map(|c| c.text.clone()))
                    .set_expression_attribute_names(cond.as_ref().and_then(Expr::names))
                    .set_expression_attribute_values(cond.as_ref().and_then(Expr::values))
                    .build()
                    .map_err(built)?;
                TransactWriteItem::builder().put(put).build()
            }
            Write::Delete { pk, sk, cond } => {
                let cond = condition(cond, now);
                let delete = Delete::builder()
                    .table_name(&self.table)
                    .set_key(Some(key(&pk, &sk)))
                    .set_condition_expression(cond.as_ref().map(|c| c.text.clone()))
                    .set_expression_attribute_names(cond.as_ref().and_then(Expr::names))
                    .set_expression_attribute_values(cond.as_ref().and_then(Expr::values))
                    .build()
                    .map_err(built)?;
                TransactWriteItem::builder().delete(delete).build()
            }
            Write::Add { pk, sk, by } => {
                let add = AddExpr::new(by);
                let update = Update::builder()
                    .table_name(&self.table)
                    .set_key(Some(key(&pk, &sk)))
                    .update_expression(AddExpr::UPDATE)
                    .set_condition_expression(add.condition.clone())
                    .set_expression_attribute_names(Some(add.names()))
                    .set_expression_attribute_values(Some(add.values))
                    .build()
                    .map_err(built)?;
                TransactWriteItem::builder().update(update).build()
            }
            Write::Check { pk, sk, cond } => {
                // A check needs a condition; `Cond::None` checks only that the request is valid.
                let cond = condition(cond, now).unwrap_or_else(|| Expr {
                    text: "attribute_not_exists(#pk) OR attribute_exists(#pk)".into(),
                    names: HashMap::from([("#pk".to_owned(), PK.to_owned())]),
                    values: HashMap::new(),
                });
                let check = ConditionCheck::builder()
                    .table_name(&self.table)
                    .set_key(Some(key(&pk, &sk)))
                    .condition_expression(cond.text.clone())
                    .set_expression_attribute_names(cond.names())
                    .set_expression_attribute_values(cond.values())
                    .build()
                    .map_err(built)?;
                TransactWriteItem::builder().condition_check(check).build()
            }
        })
    }

    /// One `TransactWriteItems`, its cancellation reasons mapped to the port's errors.
    async fn write_many(&self, writes: Vec<Write>, now: i64) -> Result<(), StoreError> {
        let items = writes
            .into_iter()
            .map(|w| self.transact_item(w, now))
            .collect::<Result<Vec<_>, _>>()?;
        let result = self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            // Makes the SDK's retries of this call idempotent (for ten minutes).
            .client_request_token(uuid::Uuid::new_v4().to_string())
            .send()
            .await;
        let e = match result {
            Ok(_) => return Ok(()),
            Err(e) => e,
        };
        use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError as E;
        if let SdkError::ServiceError(service) = &e {
            match service.err() {
                E::TransactionCanceledException(cancelled) => {
                    let reasons = cancelled.cancellation_reasons();
                    let code = |c: &str| reasons.iter().position(|r| r.code() == Some(c));
                    if let Some(index) = code("ConditionalCheckFailed") {
                        return Err(StoreError::ConditionFailed { index });
                    }
                    if code("TransactionConflict").is_some() {
                        return Err(StoreError::Conflict);
                    }
                }
                E::TransactionInProgressException(_) => return Err(StoreError::Conflict),
                _ => {}
            }
        }
        Err(write_error(e))
    }

    /// Reads up to 100 distinct keys, retrying what DynamoDB leaves unprocessed.
    async fn batch_get_chunk(&self, keys: &[(String, String)]) -> Result<Vec<Item>, StoreError> {
        let request = |keys: Vec<HashMap<String, AttributeValue>>| {
            KeysAndAttributes::builder()
                .set_keys(Some(keys))
                .consistent_read(true)
                .build()
                .map_err(|e| invalid(e.to_string()))
        };
        let mut pending = Some(HashMap::from([(
            self.table.clone(),
            request(keys.iter().map(|(pk, sk)| key(pk, sk)).collect())?,
        )]));
        let mut found = Vec::with_capacity(keys.len());
        for attempt in 0..BATCH_GET_ATTEMPTS {
            if attempt > 0 {
                backoff(attempt).await;
            }
            let out = self
                .client
                .batch_get_item()
                .set_request_items(pending.take())
                .send()
                .await
                .map_err(read_error)?;
            if let Some(items) = out.responses.and_then(|mut r| r.remove(&self.table)) {
                for attrs in &items {
                    found.push(from_attributes(attrs)?);
                }
            }
            pending = out
                .unprocessed_keys
                .filter(|u| u.values().any(|k| !k.keys().is_empty()));
            if pending.is_none() {
                return Ok(found);
            }
        }
        Err(StoreError::Unavailable(
            format!("DynamoDB left keys unprocessed after {BATCH_GET_ATTEMPTS} attempts").into(),
        ))
    }

    /// `ADD` to a live (or absent) counter; `Ok(None)` when the counter is there but expired.
    async fn add_to_live_counter(
        &self,
        pk: &str,
        sk: &str,
        by: u64,
        expires_at: i64,
        now: i64,
    ) -> Result<Option<u64>, StoreError> {
        let out = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(pk, sk)))
            .update_expression("ADD #cnt :by, #ver :one SET #exp = :at")
            .condition_expression("attribute_not_exists(#pk) OR #exp > :now")
            .expression_attribute_names("#cnt", COUNT)
            .expression_attribute_names("#ver", VERSION)
            .expression_attribute_names("#exp", EXPIRES_AT)
            .expression_attribute_names("#pk", PK)
            .expression_attribute_values(":by", n(by))
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":at", n(expires_at))
            .expression_attribute_values(":now", n(now))
            .return_values(ReturnValue::AllNew)
            .send()
            .await;
        match out {
            Ok(out) => {
                let attrs = out.attributes.unwrap_or_default();
                let count = number_attr::<u64>(&attrs, COUNT)
                    .map_err(|_| invalid(format!("counter ({pk}, {sk}) overflowed")))?
                    .ok_or_else(|| corrupt("an update that returned no count"))?;
                Ok(Some(count))
            }
            Err(e) => match write_error(e) {
                StoreError::ConditionFailed { .. } => Ok(None),
                e => Err(e),
            },
        }
    }

    /// Starts an expired counter over at `by`; `Ok(false)` when it is no longer expired
    /// (another writer restarted it first).
    async fn restart_expired_counter(
        &self,
        pk: &str,
        sk: &str,
        by: u64,
        expires_at: i64,
        now: i64,
    ) -> Result<bool, StoreError> {
        let out = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(pk, sk)))
            .update_expression("SET #cnt = :by, #ver = :one, #exp = :at REMOVE #body, #gpk, #gsk")
            .condition_expression("#exp <= :now")
            .expression_attribute_names("#cnt", COUNT)
            .expression_attribute_names("#ver", VERSION)
            .expression_attribute_names("#exp", EXPIRES_AT)
            .expression_attribute_names("#body", BODY)
            .expression_attribute_names("#gpk", GSI1PK)
            .expression_attribute_names("#gsk", GSI1SK)
            .expression_attribute_values(":by", n(by))
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":at", n(expires_at))
            .expression_attribute_values(":now", n(now))
            .send()
            .await;
        match out {
            Ok(_) => Ok(true),
            Err(e) => match write_error(e) {
                StoreError::ConditionFailed { .. } => Ok(false),
                e => Err(e),
            },
        }
    }
}

#[async_trait]
impl Store for DynamoStore {
    async fn get(&self, pk: &str, sk: &str) -> Result<Option<Item>, StoreError> {
        // No item has an empty key part (DynamoDB would refuse to even look), as embedded.
        if pk.is_empty() || sk.is_empty() {
            return Ok(None);
        }
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key(pk, sk)))
            .consistent_read(true)
            .send()
            .await
            .map_err(read_error)?;
        let now = self.clock.unix();
        match out.item {
            Some(attrs) => Ok(Some(from_attributes(&attrs)?).filter(|i| is_live(i, now))),
            None => Ok(None),
        }
    }

    async fn batch_get(&self, keys: &[(String, String)]) -> Result<Vec<Option<Item>>, StoreError> {
        // DynamoDB refuses repeated keys in one request: ask for each key once. Keys with an
        // empty part name no item (and DynamoDB would refuse them): they are simply absent.
        let mut seen = HashSet::with_capacity(keys.len());
        let unique: Vec<(String, String)> = keys
            .iter()
            .filter(|k| !k.0.is_empty() && !k.1.is_empty())
            .filter(|k| seen.insert((k.0.as_str(), k.1.as_str())))
            .cloned()
            .collect();
        let chunks = unique
            .chunks(BATCH_GET_KEYS)
            .map(|chunk| self.batch_get_chunk(chunk));
        let mut found: HashMap<(String, String), Item> = HashMap::with_capacity(unique.len());
        for items in futures::future::try_join_all(chunks).await? {
            for item in items {
                found.insert((item.pk.clone(), item.sk.clone()), item);
            }
        }
        // Each item is moved to the first place it was asked at, and copied only for a repeat
        // (search's vector blocks are ~230 KB each at 10,000 pages: no second copy of them).
        let now = self.clock.unix();
        let mut first: HashMap<(&str, &str), usize> = HashMap::with_capacity(keys.len());
        let mut out: Vec<Option<Item>> = Vec::with_capacity(keys.len());
        for k in keys {
            let item = match first.get(&(k.0.as_str(), k.1.as_str())) {
                Some(&at) => out[at].clone(),
                None => {
                    first.insert((k.0.as_str(), k.1.as_str()), out.len());
                    found.remove(k).filter(|i| is_live(i, now))
                }
            };
            out.push(item);
        }
        Ok(out)
    }

    async fn query(&self, q: &Query) -> Result<QueryPage, StoreError> {
        if q.limit == 0 {
            return Err(invalid("query limit must be at least 1"));
        }
        if q.partition.is_empty() {
            return Err(invalid("query partition must not be empty"));
        }
        let start = q
            .after
            .as_deref()
            .map(|c| decode_cursor(c, q))
            .transpose()?;
        let range = SortRange::of(q);
        if range.is_empty() {
            return Ok(QueryPage::default());
        }
        let (partition_attr, sort_attr, index) = match q.index {
            Index::Table => (PK, SK, None),
            Index::Gsi1 => (GSI1PK, GSI1SK, Some(GSI1)),
        };
        let mut e = range.key_condition(partition_attr, sort_attr, &q.partition);
        let now = self.clock.unix();
        e.name("#exp", EXPIRES_AT).value(":now", n(now));
        let out = self
            .client
            .query()
            .table_name(&self.table)
            .set_index_name(index.map(str::to_owned))
            .key_condition_expression(e.text.clone())
            .filter_expression("attribute_not_exists(#exp) OR #exp > :now")
            .set_expression_attribute_names(e.names())
            .set_expression_attribute_values(e.values())
            .scan_index_forward(!q.reverse)
            .limit(i32::try_from(q.limit).unwrap_or(i32::MAX))
            // Index queries cannot be strongly consistent; table queries are, like `get`.
            .consistent_read(index.is_none())
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(read_error)?;
        let mut page = QueryPage::default();
        for attrs in out.items.unwrap_or_default() {
            let item = from_attributes(&attrs)?;
            let sort_key = match q.index {
                Index::Table => Some(item.sk.as_str()),
                Index::Gsi1 => item.gsi1.as_ref().map(|(_, gsk)| gsk.as_str()),
            };
            if sort_key.is_some_and(|k| range.contains(k)) && is_live(&item, now) {
                page.items.push(item);
            }
        }
        page.next = out
            .last_evaluated_key
            .filter(|k| !k.is_empty())
            .map(|k| encode_cursor(&k))
            .transpose()?;
        Ok(page)
    }

    async fn transact(&self, mut writes: Vec<Write>) -> Result<(), StoreError> {
        crate::ports::validate_writes(&writes)?;
        let now = self.clock.unix();
        match writes.len() {
            0 => Ok(()),
            1 if !matches!(writes[0], Write::Check { .. }) => {
                self.write_one(writes.pop().expect("one write"), now).await
            }
            _ => self.write_many(writes, now).await,
        }
    }

    async fn increment(
        &self,
        pk: &str,
        sk: &str,
        by: u64,
        expires_at: i64,
    ) -> Result<u64, StoreError> {
        crate::ports::validate_key(pk, sk)?;
        for _ in 0..INCREMENT_ATTEMPTS {
            let now = self.clock.unix();
            if let Some(count) = self
                .add_to_live_counter(pk, sk, by, expires_at, now)
                .await?
            {
                return Ok(count);
            }
            if self
                .restart_expired_counter(pk, sk, by, expires_at, now)
                .await?
            {
                return Ok(by);
            }
        }
        Err(StoreError::Conflict)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(prefix: &str, from: Option<&str>, to: Option<&str>) -> Query {
        Query {
            from: from.map(str::to_owned),
            to: to.map(str::to_owned),
            ..Query::table("P", prefix)
        }
    }

    #[test]
    fn prefix_successors() {
        assert_eq!(prefix_successor("A#").as_deref(), Some("A$"));
        assert_eq!(prefix_successor("a").as_deref(), Some("b"));
        assert_eq!(prefix_successor("a\u{10FFFF}").as_deref(), Some("b"));
        assert_eq!(prefix_successor("\u{D7FF}").as_deref(), Some("\u{E000}"));
        assert_eq!(prefix_successor("\u{10FFFF}"), None);
        assert_eq!(prefix_successor(""), None);
    }

    #[test]
    fn key_conditions_use_one_sort_key_condition() {
        let text = |q: &Query| SortRange::of(q).key_condition(PK, SK, "P").text;
        assert_eq!(text(&q("", None, None)), "#p = :p");
        assert_eq!(
            text(&q("A#", None, None)),
            "#p = :p AND begins_with(#s, :pre)"
        );
        assert_eq!(
            text(&q("A#", Some("A#2"), None)),
            "#p = :p AND #s BETWEEN :lo AND :hi"
        );
        assert_eq!(text(&q("", Some("AB"), None)), "#p = :p AND #s >= :lo");
        assert_eq!(text(&q("", None, Some("A#1"))), "#p = :p AND #s <= :hi");
    }

    #[test]
    fn ranges_match_the_ports_semantics() {
        let keys = ["A", "A#1", "A#49", "A#5", "A$", "AB", "B#1"];
        let cases: [(Query, &[&str]); 6] = [
            (q("A#", None, None), &["A#1", "A#49", "A#5"]),
            (q("A#", Some("A#0"), Some("A#49")), &["A#1", "A#49"]),
            (q("A#", Some("A#2"), Some("Z")), &["A#49", "A#5"]),
            (q("", Some("A$"), None), &["A$", "AB", "B#1"]),
            (q("", None, Some("A#1")), &["A", "A#1"]),
            (q("B", Some("0"), Some("Z")), &["B#1"]),
        ];
        for (query, want) in cases {
            let range = SortRange::of(&query);
            let got: Vec<&str> = keys.iter().copied().filter(|k| range.contains(k)).collect();
            assert_eq!(got, want, "{query:?}");
        }
        assert!(SortRange::of(&q("A#", Some("A#4"), Some("A#3"))).is_empty());
        assert!(SortRange::of(&q("A#", Some("B"), None)).is_empty());
        assert!(SortRange::of(&q("", None, Some(""))).is_empty());
        assert!(!SortRange::of(&q("A#", Some("A#3"), Some("A#3"))).is_empty());
    }

    #[test]
    fn cursors_round_trip_and_are_checked() {
        let key = HashMap::from([
            (PK.to_owned(), s("P")),
            (SK.to_owned(), s("K#1")),
            (GSI1PK.to_owned(), s("G")),
            (GSI1SK.to_owned(), s("2024")),
        ]);
        let cursor = encode_cursor(&key).unwrap();
        let gsi = Query::gsi1("G", "");
        assert_eq!(decode_cursor(&cursor, &gsi).unwrap(), key);
        // Another partition, another index, or garbage: refused.
        for (cursor, query) in [
            (cursor.clone(), Query::gsi1("H", "")),
            (cursor.clone(), Query::table("P", "")),
            ("not a cursor!".to_owned(), gsi.clone()),
            (CURSOR.encode(b"[1,2]"), gsi.clone()),
        ] {
            assert!(matches!(
                decode_cursor(&cursor, &query),
                Err(StoreError::Invalid(_))
            ));
        }
    }

    #[test]
    fn items_round_trip_through_attributes() {
        let item = Item {
            pk: "U#a".into(),
            sk: "PAGE#1".into(),
            gsi1: Some(("U#a#PAGES".into(), "2024-01-01#1".into())),
            version: u64::MAX,
            expires_at: Some(-5),
            body: vec![0, 1, 2],
        };
        assert_eq!(from_attributes(&to_attributes(&item)).unwrap(), item);
        let mut counter = key("RL#1", "RL");
        counter.insert(COUNT.into(), n(7));
        counter.insert(VERSION.into(), n(3));
        let counter = from_attributes(&counter).unwrap();
        assert_eq!(counter.body, 7u64.to_be_bytes());
        assert_eq!(counter.version, 3);
    }
}
