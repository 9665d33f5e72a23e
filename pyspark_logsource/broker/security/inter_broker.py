"""How this broker connects to the others (replica fetchers, transaction markers): as a client of the
inter-broker listener (``inter.broker.listener.name``), with that listener's protocol.

Kafka's settings: TLS trusts ``ssl.truststore.location`` and presents ``ssl.keystore.location`` (the
broker's own certificate, its principal on an SSL listener with client authentication); SASL uses
``sasl.mechanism.inter.broker.protocol`` with the credentials of
``listener.name.<listener>.<mechanism>.sasl.jaas.config`` (e.g.
``listener.name.internal.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule
required username="broker" password="...";``), whose user ``super.users`` names once ACLs exist.
"""

from __future__ import annotations

from typing import Any

from ...client.security import ClientSecurity, parse_jaas_config
from ...errors import ConfigError


def jaas_key(listener: str, mechanism: str) -> str:
    return f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"


def inter_broker_security(config: Any) -> ClientSecurity | None:
    """The client settings of this broker's connections to the others; None on a PLAINTEXT listener."""
    ls = config.listeners
    if ls is None:
        return None
    protocol = ls.by_name(ls.inter_broker).protocol
    if protocol == "PLAINTEXT":
        return None
    s = config.security
    options: dict[str, Any] = {"security_protocol": protocol}
    if protocol in ("SSL", "SASL_SSL"):
        if s.truststore_location is not None:
            options["ssl_cafile"] = str(s.truststore_location)
        if s.keystore_location is not None:
            options["ssl_certfile"] = str(s.keystore_location)
            options["ssl_password"] = s.key_password
    if protocol.startswith("SASL_"):
        mech = s.inter_broker_mechanism
        key = jaas_key(ls.inter_broker, mech)
        jaas = config.properties.get(key, "").strip()
        if not jaas:
            raise ConfigError(
                f"the inter-broker listener {ls.inter_broker} uses {protocol}: set {key} "
                "(the broker's own user and password)"
            )
        user, password = parse_jaas_config(jaas)
        options.update(sasl_mechanism=mech, sasl_plain_username=user, sasl_plain_password=password)
    return ClientSecurity.from_options(options)
