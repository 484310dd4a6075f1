"""The agent's faster import of the ACP SDK gives the very models a plain import gives."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

# Every pydantic model of acp.schema: its fields (alias, description, annotation,
# default), its config and its JSON schema; then one request and one response
# through the models, as the wire sees them.  Printed as JSON.
DUMP = """
import json, sys
{load}
import acp.schema as schema
from pydantic import BaseModel

deferred = sorted(
    name for name, value in vars(schema).items()
    if isinstance(value, type) and issubclass(value, BaseModel)
    and value.__module__ == schema.__name__ and not value.__pydantic_complete__
)
models = {{}}
for name, value in sorted(vars(schema).items()):
    if not (isinstance(value, type) and issubclass(value, BaseModel)):
        continue
    if value.__module__ != schema.__name__:
        continue
    fields = {{
        field: [info.alias, info.description, repr(info.annotation), repr(info.default)]
        for field, info in value.model_fields.items()
    }}
    config = {{key: repr(item) for key, item in sorted(value.model_config.items())}}
    try:
        json_schema = value.model_json_schema(by_alias=True)
    except Exception as exc:
        json_schema = type(exc).__name__
    models[name] = {{"fields": fields, "config": config, "schema": json_schema}}
request = schema.InitializeRequest.model_validate(
    {{"protocolVersion": 1, "clientCapabilities": {{"fs": {{"readTextFile": True}}}}}}
)
response = schema.InitializeResponse(
    protocol_version=1, agent_capabilities=schema.AgentCapabilities(load_session=True)
)
wire = [
    request.model_dump(mode="json", by_alias=True, exclude_none=True),
    response.model_dump(mode="json", by_alias=True, exclude_none=True),
]
print(json.dumps({{"deferred": deferred, "models": models, "wire": wire}}, sort_keys=True))
"""


def _dump(load: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", DUMP.format(load=load)],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_the_fast_import_gives_every_model_of_a_plain_import_and_defers_their_build() -> None:
    plain = _dump("")
    fast = _dump("from tool_failure_guard.sdk_import import import_acp\nimport_acp()")
    assert len(plain["models"]) > 200
    assert sorted(fast["models"]) == sorted(plain["models"])
    for name, model in plain["models"].items():
        assert fast["models"][name] == model, name
    # the descriptions come from the attribute docstrings, and there are many
    described = [
        field for model in fast["models"].values() for field in model["fields"].values() if field[1]
    ]
    assert len(described) > 500
    assert fast["wire"] == plain["wire"]
    assert fast["wire"][0]["clientCapabilities"]["fs"]["readTextFile"] is True
    # A plain import builds every model at once; the fast one had built none of
    # the models before the first use (the dump above then built them).
    assert len(fast["deferred"]) > 200
    assert len(fast["deferred"]) > len(plain["deferred"])


def test_the_fast_import_leaves_pydantic_as_it_found_it() -> None:
    code = (
        "from pydantic._internal import _config, _fields\n"
        "before = (_fields.extract_docstrings_from_cls, _config.config_defaults['defer_build'])\n"
        "from tool_failure_guard.sdk_import import import_acp\n"
        "import_acp()\n"
        "import sys\n"
        "after = (_fields.extract_docstrings_from_cls, _config.config_defaults['defer_build'])\n"
        "print('acp' in sys.modules, before == after, after[1])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.split() == ["True", "True", "False"]
