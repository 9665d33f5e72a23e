"""The broker: the log store (``broker.log``) and the server around it."""
