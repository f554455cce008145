"""The consumer child's outbox: messages pickled on the sending thread, written in order by the sender thread, read
by the parent as ``Connection.recv`` reads them."""

from __future__ import annotations

import os
import pickle
from collections.abc import Iterator
from multiprocessing.connection import Connection

import numpy as np
import pytest

from monitor.source.kafka_process import _Outbox


@pytest.fixture
def pipe() -> Iterator[tuple[Connection, _Outbox]]:
    read_fd, write_fd = os.pipe()
    reader, writer = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    outbox = _Outbox(writer)
    yield reader, outbox
    outbox.finish()
    reader.close()
    writer.close()


def test_messages_arrive_in_order_as_sent(pipe: tuple[Connection, _Outbox]) -> None:
    reader, outbox = pipe
    rng = np.random.default_rng(7)
    features = rng.normal(size=(300, 20))
    values = [bytes(rng.integers(0, 256, size=600, dtype=np.uint8)) for _ in range(300)]  # ~180 KB: written in parts
    outbox.send("records", (values, features))
    outbox.send("highwaters", {("t", 0): 12})
    kind, (got_values, got_features) = reader.recv()
    assert kind == "records" and got_values == values
    np.testing.assert_array_equal(got_features, features)
    assert reader.recv() == ("highwaters", {("t", 0): 12})


def test_payload_is_taken_as_it_was_when_sent(pipe: tuple[Connection, _Outbox]) -> None:
    reader, outbox = pipe
    positions = {("t", 0): 5}
    outbox.send("commit", positions)
    positions[("t", 0)] = 99  # changed after sending: the message holds what was sent
    assert reader.recv() == ("commit", {("t", 0): 5})


def test_unpicklable_payload_fails_in_send(pipe: tuple[Connection, _Outbox]) -> None:
    reader, outbox = pipe
    with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):
        outbox.send("records", lambda: None)
    outbox.send("closed", None)  # the sender thread is still there
    assert reader.recv() == ("closed", None)
