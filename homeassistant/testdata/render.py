# Renders a Home Assistant template with Jinja2's sandbox, as Home
# Assistant does (homeassistant/helpers/template.py builds on
# jinja2.sandbox.ImmutableSandboxedEnvironment), with the one global of
# Home Assistant's that Hearth's templates use: now().
# stdin: {"template": "...", "vars": {...}, "payload": "..." (optional:
# value and value_json, as for a value template)}; stdout: the rendering.
import datetime
import json
import sys

from jinja2.sandbox import ImmutableSandboxedEnvironment

req = json.load(sys.stdin)
env = ImmutableSandboxedEnvironment()
env.globals["now"] = lambda: datetime.datetime.now(datetime.timezone.utc)
variables = dict(req.get("vars") or {})
if "payload" in req:
    variables["value"] = req["payload"]
    try:
        variables["value_json"] = json.loads(req["payload"])
    except ValueError:
        pass
sys.stdout.write(env.from_string(req["template"]).render(**variables))
