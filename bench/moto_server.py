#!/usr/bin/env python3
"""moto's server (`moto_server`'s arguments) with cheaper DynamoDB transactions and queries,
for bench/cold.py. Run with the project's venv (`.venv/bin/python`).

moto 5 costs the square of a notebook's size to fill, and a query costs the whole table:

- TransactWriteItems deep-copies the whole table once per item of the transaction, so it can
  restore the table when the transaction is cancelled. Every page `nib import` commits is one
  transaction of dozens of items (the page, its postings, ...): 1,000 generated pages did not
  finish in 10 minutes, and moto grew past 11 GB. Here a transaction backs up only the items
  it names (each one's state before, or its absence) and puts exactly those back when it is
  cancelled, which is what DynamoDB promises (all or nothing). Transactions are also
  serialised with each other, which moto's were not.
- Query sorts every item of the table (`Table.all_items`), keeps the partition's, sorts those
  and tests the sort key condition on each. A notebook is one partition, so at 1,000 pages a
  query took about a second. Here a query on the table itself (not an index) starts from the
  items of its partition whose sort key can match the key condition; moto's own code
  then sorts, tests and pages them as before, so answers are unchanged.

Everything else is moto's own code.

With NIB_MOTO_TIMING=1 every request's time in moto and its response's size are written to
stderr, one line each (`moto-timing <X-Amz-Target, else the HTTP method> <ms> <bytes>`), to tell where a
cold search's time goes (bench/findings.md, "Footprint, ninth pass").
"""

import copy
import os
import sys
import threading
import time

from moto.dynamodb import models
from moto.dynamodb.models import table as tables
from moto.moto_server.werkzeug_app import DomainDispatcherApplication
from moto.server import main


class _TablesNotCopied:
    """The `copy` module as moto's transaction sees it: tables are not copied (the backup is
    made per item below, and restoring a table then puts the same object back)."""

    def __getattr__(self, name):
        return getattr(copy, name)

    @staticmethod
    def deepcopy(value, *args, **kwargs):
        if isinstance(value, models.Table):
            return value
        return copy.deepcopy(value, *args, **kwargs)


_LOCK = threading.Lock()
_moto_transact = models.DynamoDBBackend.transact_write_items


def _item_key(table, op):
    if "Key" in op:
        return op["Key"]
    item = op.get("Item", {})
    names = [table.hash_key_attr, table.range_key_attr]
    return {n: item[n] for n in names if n is not None and n in item}


def transact_write_items(self, transact_items):
    with _LOCK:
        backups = []
        for entry in transact_items:
            try:
                _, op = next(iter(entry.items()))
                name = op["TableName"]
                key = _item_key(self.get_table(name), op)
                before = self.get_item(name, key)
            except Exception:
                continue  # moto's own code below reports what is wrong with this entry
            backups.append((name, key, copy.deepcopy(before)))
        try:
            return _moto_transact(self, transact_items)
        except Exception:
            # Newest first, so an item named twice ends as it was before the transaction.
            for name, key, before in reversed(backups):
                if before is None:
                    try:
                        self.delete_item(name, key)
                    except Exception:
                        pass
                else:
                    self.put_item(name, before.to_json()["Attributes"])
            raise


_QUERYING = threading.local()
_moto_all_items = tables.Table.all_items
_moto_query = tables.Table.query


def all_items(self):
    only = getattr(_QUERYING, "items", None)
    return _moto_all_items(self) if only is None else only


def _may_match(partition, comparison, values):
    """The partition's items whose sort key can satisfy the condition (a superset: moto tests
    each again)."""
    items = list(partition.values())  # one step under the GIL: writers may run meanwhile
    v = [x.value for x in values or ()]
    if not all(isinstance(x, str) for x in v) or not all(
            isinstance(i.range_key.value, str) for i in items if i.range_key is not None):
        return items
    # Code point order is UTF-8 byte order, DynamoDB's order of strings.
    test = {
        "BEGINS_WITH": lambda k: k.startswith(v[0]),
        "BETWEEN": lambda k: v[0] <= k <= v[1],
        "=": lambda k: k == v[0],
        "<": lambda k: k < v[0],
        "<=": lambda k: k <= v[0],
        ">": lambda k: k > v[0],
        ">=": lambda k: k >= v[0],
    }.get((comparison or "").upper())
    if test is None:
        return items
    return [i for i in items if i.range_key is not None and test(i.range_key.value)]


def query(self, hash_key, range_comparison, range_objs, *args, **kwargs):
    index_name = args[4] if len(args) > 4 else kwargs.get("index_name")
    partition = self.items.get(hash_key) if hash_key is not None else None
    if index_name or not self.range_key_attr or not isinstance(partition, dict):
        return _moto_query(self, hash_key, range_comparison, range_objs, *args, **kwargs)
    _QUERYING.items = _may_match(partition, range_comparison, range_objs)
    try:
        return _moto_query(self, hash_key, range_comparison, range_objs, *args, **kwargs)
    finally:
        _QUERYING.items = None


_moto_call = DomainDispatcherApplication.__call__


def timed_call(self, environ, start_response):
    """moto's WSGI application, its time and response size written to stderr."""
    started = time.perf_counter()
    body = b"".join(_moto_call(self, environ, start_response))
    what = environ.get("HTTP_X_AMZ_TARGET") or environ.get("REQUEST_METHOD")
    print(f"moto-timing {what} {(time.perf_counter() - started) * 1000:.1f} {len(body)}",
          file=sys.stderr, flush=True)
    return [body]


if os.environ.get("NIB_MOTO_TIMING") == "1":
    DomainDispatcherApplication.__call__ = timed_call
models.copy = _TablesNotCopied()
models.DynamoDBBackend.transact_write_items = transact_write_items
tables.Table.all_items = all_items
tables.Table.query = query

if __name__ == "__main__":
    sys.argv[0] = "moto_server"
    sys.exit(main())
