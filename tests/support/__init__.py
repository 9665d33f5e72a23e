"""Importable test helpers (tests/ is on sys.path under pytest, so ``from support.brokers import ...``).

- ``brokers``: brokers in a child process or a thread, and a synchronous wire client (``WireClient``)
- ``cluster``: a cluster of broker processes against a real ZooKeeper
- ``logdata``: partition logs and batches for the log-layer tests
- ``spark_jvm``: the JVM options and class-data archive of the tests' short-lived Spark drivers
- ``copy_rename_fs``: a Hadoop filesystem double whose rename copies then deletes (also a job script)
- ``group_member``: a consumer-group member process (run by path)

tests/helpers/ holds the scripts the tests only run by path, as child processes.
"""
