"""Admin APIs that act on logs: DeleteRecords and DescribeLogDirs (:mod:`.records`)."""
