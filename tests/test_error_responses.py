"""The error code and message a client is told (broker/error_responses.error_fields), on a real broker."""

from __future__ import annotations

from support.brokers import WireClient, broker_thread

from pyspark_logsource.broker.error_responses import UNKNOWN_SERVER_ERROR_MESSAGE, error_fields
from pyspark_logsource.errors import ConfigError, InvalidTopic, NotCoordinator, UnknownServerError
from pyspark_logsource.protocol import ApiKey
from pyspark_logsource.protocol.messages import DescribeClusterRequest

SECRET = "sasl.jaas.config=password=hunter2 in /etc/secret/broker.properties"


def test_a_typed_error_is_answered_with_its_code_and_message():
    assert error_fields(InvalidTopic("topic name 'a/b' contains illegal characters")) == (
        InvalidTopic.code,
        "topic name 'a/b' contains illegal characters",
    )
    assert error_fields(NotCoordinator()) == (NotCoordinator.code, NotCoordinator.__doc__)
    assert error_fields(InvalidTopic("x")).code == InvalidTopic.code


def test_an_untyped_or_client_side_error_is_unknown_server_error_without_its_text():
    for e in (RuntimeError(SECRET), KeyError(SECRET), ConfigError(SECRET)):
        code, message = error_fields(e)
        assert code == UnknownServerError.code
        assert message == UNKNOWN_SERVER_ERROR_MESSAGE and "hunter2" not in message


def test_a_broker_bug_is_answered_with_unknown_server_error_and_the_connection_goes_on(tmp_path):
    with broker_thread(tmp_path) as b:

        def bug(req, session):
            raise RuntimeError(SECRET)

        b._broker.handlers.by_key[ApiKey.DESCRIBE_CLUSTER] = bug
        with WireClient(b.bootstrap) as c:
            resp = c.request(DescribeClusterRequest(), check=False)
            assert resp.error_code == UnknownServerError.code
            assert resp.error_message == UNKNOWN_SERVER_ERROR_MESSAGE
            assert "hunter2" not in repr(resp) and "Traceback" not in repr(resp)
            assert c.create_topic("after-the-bug") == 0  # the same connection is still served
