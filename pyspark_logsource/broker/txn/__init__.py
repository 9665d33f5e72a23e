"""Transactions of staged Spark writes: the coordinator and its request handler."""

from .coordinator import TXN_TOPIC, TxnCoordinator

__all__ = ["TXN_TOPIC", "TxnCoordinator"]
