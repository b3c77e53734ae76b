"""crawlfleet's own checkov check: Redis (6379) and Postgres (5432) must never be
reachable from the whole internet. checkov's built-in rules cover 22 and 3389 but
not these. Run by scripts/check-infra with --external-checks-dir."""

from checkov.common.models.enums import CheckCategories, CheckResult
from checkov.terraform.checks.resource.base_resource_check import BaseResourceCheck

DATA_PORTS = (5432, 6379)
WORLD = {"0.0.0.0/0", "::/0"}


def _flatten(value):
    """checkov wraps every attribute in a list; undo that, however deep."""
    if value is None:
        return []
    if isinstance(value, list):
        return [item for element in value for item in _flatten(element)]
    return [value]


def _first(value, default=None):
    values = _flatten(value)
    return values[0] if values else default


def _opens_data_port_to_world(rule):
    cidrs = set()
    for key in ("cidr_blocks", "ipv6_cidr_blocks", "cidr_ipv4", "cidr_ipv6"):
        cidrs.update(str(c) for c in _flatten(rule.get(key)))
    if not cidrs & WORLD:
        return False
    protocol = str(_first(rule.get("protocol", rule.get("ip_protocol")), "tcp")).lower()
    if protocol in ("-1", "all"):
        return True
    try:
        low = int(_first(rule.get("from_port")))
        high = int(_first(rule.get("to_port")))
    except (TypeError, ValueError):
        return True  # ports we cannot read, open to the world: refuse
    return any(low <= port <= high for port in DATA_PORTS)


class DataPortsNotOpenToWorld(BaseResourceCheck):
    def __init__(self):
        super().__init__(
            name="Redis (6379) and Postgres (5432) are never open to 0.0.0.0/0 or ::/0",
            id="CKV_CRAWLFLEET_1",
            categories=[CheckCategories.NETWORKING],
            supported_resources=[
                "aws_security_group",
                "aws_security_group_rule",
                "aws_vpc_security_group_ingress_rule",
            ],
        )

    def scan_resource_conf(self, conf):
        if self.entity_type == "aws_security_group":
            rules = [r for r in _flatten(conf.get("ingress")) if isinstance(r, dict)]
        elif self.entity_type == "aws_security_group_rule":
            rules = [conf] if _first(conf.get("type")) == "ingress" else []
        else:
            rules = [conf]
        if any(_opens_data_port_to_world(rule) for rule in rules):
            return CheckResult.FAILED
        return CheckResult.PASSED


check = DataPortsNotOpenToWorld()
