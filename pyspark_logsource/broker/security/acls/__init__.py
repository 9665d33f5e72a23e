"""Authorization (issue 22): Kafka's ACL model (model.py), where ACLs are kept (store.py), what every
API needs (checks.py), the ACL APIs (handlers.py), assembled by authorization.py."""
