"""The broker's security (issue 22): listeners and their protocols (:mod:`.listeners`), TLS
(:mod:`.tls`), SASL (:mod:`.sasl`, sans-IO), SCRAM credentials and where they are kept
(:mod:`.scram_credentials`, :mod:`.credential_store`), and the SASL and credential APIs of an
authenticated connection (:mod:`.handlers`). The authenticated principal goes on the connection's
:class:`~..session.Session` (``User:NAME``; ``User:ANONYMOUS`` on PLAINTEXT; ``User:<subject>`` for mTLS),
where authorization (ACLs) can read it.
"""
