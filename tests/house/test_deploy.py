"""The Azure deployment, checked without Azure: deploy/azuredeploy.json, its example parameters, deploy.sh,
the Dockerfile and .dockerignore.

The template is checked statically (every ARM expression parsed; every parameter and variable it names
declared in the right scope; no secrets) and by evaluation: a small ARM expression evaluator expands the
template with the example parameters against fake existing resources, so the tests see the role assignments,
app settings and bot properties Azure would get, and feed the app settings to the app's own Settings.
deploy.sh runs against a fake `az` on PATH.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
import os
import re
import shlex
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bot.config import Settings, variables
from bot.orchestrator.memory import TokenCounter

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
TEMPLATE = json.loads((DEPLOY / "azuredeploy.json").read_text())
EXAMPLE = json.loads((DEPLOY / "azuredeploy.parameters.example.json").read_text())["parameters"]
SCHEMA = "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#"

# Built-in role definition ids, from Microsoft's "Azure built-in roles" reference (learn.microsoft.com/azure/
# role-based-access-control/built-in-roles/monitor, /security, /ai-machine-learning, /containers).
LOG_ANALYTICS_READER = "73c42c96-874c-492b-b04d-ab87d138a893"
SENTINEL_READER = "8d289c81-5878-46d4-8554-54e1e3d8b5cb"
OPENAI_USER = "5e0bd9bd-7b93-4f28-af87-19fc36ad61bd"
ACR_PULL = "7f951dda-4ed3-4680-a7ca-43fe172d538d"
# Microsoft Sentinel Responder (/security page): Sentinel Reader's rights plus incidents/* (update, comment), minus
# incidents/*/Delete. The bot's identity gets it only when the deployment turns incident write actions on.
SENTINEL_RESPONDER = "3e150937-b8fe-4cfb-8069-0eaf05ecd056"
STORAGE_BLOB_CONTRIBUTOR = "ba92f5b4-2d11-453d-a403-e96b0029c9fe"  # Storage Blob Data Contributor
STORAGE_QUEUE_CONTRIBUTOR = "974c5e8b-45b9-4653-ba55-5f855dd0fb88"  # Storage Queue Data Contributor

# Variables the platform or SDKs read, not Settings: DefaultAzureCredential picks the user-assigned identity
# by AZURE_CLIENT_ID; the Azure Monitor exporter reads APPLICATIONINSIGHTS_CONNECTION_STRING; App Service
# reads WEBSITES_PORT (the container's port) and WEBSITES_ENABLE_APP_SERVICE_STORAGE (the /home share).
PLATFORM_SETTINGS = {"AZURE_CLIENT_ID", "APPLICATIONINSIGHTS_CONNECTION_STRING", "WEBSITES_PORT",
                     "WEBSITES_ENABLE_APP_SERVICE_STORAGE", "WEBSITES_CONTAINER_STOP_TIME_LIMIT"}
SECRET_SETTINGS = {"MICROSOFT_APP_PASSWORD", "AZURE_OPENAI_API_KEY", "OPENAI_API_KEY", "STATE_BLOB_CONNECTION_STRING"}
SECRET_NAME = re.compile(r"password|secret|key|token|credential|connectionstring|sas", re.IGNORECASE)
SECRET_VALUE = re.compile(r"(AccountKey|SharedAccessKey|password|secret)\s*[=:]"  # key=value credentials
                          r"|(?=[A-Za-z0-9+/]*\d)[A-Za-z0-9+/]{40,}={0,2}",  # a long base64 blob with digits
                          re.IGNORECASE)


# --- ARM expressions -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Call:
    name: str
    args: tuple[Any, ...]


@dataclass(frozen=True)
class Member:  # x.name
    target: Any
    name: str


@dataclass(frozen=True)
class Index:  # x[i]
    target: Any
    index: Any


@dataclass(frozen=True)
class Literal:
    value: str | int


_TOKEN = re.compile(r"\s*(?:(?P<string>'(?:[^']|'')*')|(?P<number>-?\d+)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
                    r"|(?P<punct>[(),.\[\]]))")


def is_expression(value: Any) -> bool:
    return isinstance(value, str) and value.startswith("[") and not value.startswith("[[") and value.endswith("]")


def parse(expression: str) -> Any:
    """An ARM template expression (without its outer brackets) as a tree; raises ValueError if malformed."""
    tokens: list[tuple[str, str]] = []
    position = 0
    while position < len(expression.rstrip()):
        match = _TOKEN.match(expression, position)
        if not match:
            raise ValueError(f"cannot read {expression[position:]!r}")
        kind = match.lastgroup or ""
        tokens.append((kind, match.group(kind)))
        position = match.end()
    node, end = _parse_value(tokens, 0)
    if end != len(tokens):
        raise ValueError(f"unexpected {tokens[end][1]!r} in {expression!r}")
    return node


def _expect(tokens: list[tuple[str, str]], at: int, text: str) -> int:
    if at >= len(tokens) or tokens[at][1] != text:
        raise ValueError(f"expected {text!r} at token {at}")
    return at + 1


def _parse_value(tokens: list[tuple[str, str]], at: int) -> tuple[Any, int]:
    if at >= len(tokens):
        raise ValueError("unexpected end of expression")
    kind, text = tokens[at]
    if kind == "string":
        node, at = Literal(text[1:-1].replace("''", "'")), at + 1
    elif kind == "number":
        node, at = Literal(int(text)), at + 1
    elif kind == "name":
        at = _expect(tokens, at + 1, "(")
        args: list[Any] = []
        while tokens[at][1] != ")":
            if args:
                at = _expect(tokens, at, ",")
            arg, at = _parse_value(tokens, at)
            args.append(arg)
        node, at = Call(text, tuple(args)), at + 1
    else:
        raise ValueError(f"unexpected {text!r}")
    while at < len(tokens) and tokens[at][1] in (".", "["):
        if tokens[at][1] == ".":
            node, at = Member(node, tokens[at + 1][1]), at + 2
        else:
            index, at = _parse_value(tokens, at + 1)
            node, at = Index(node, index), _expect(tokens, at, "]")
    return node, at


def calls(node: Any) -> list[Call]:
    """Every function call in an expression tree."""
    if isinstance(node, Call):
        return [node, *(c for arg in node.args for c in calls(arg))]
    if isinstance(node, Member):
        return calls(node.target)
    if isinstance(node, Index):
        return calls(node.target) + calls(node.index)
    return []


def strings(value: Any) -> list[str]:
    """Every string in a JSON value, object keys included."""
    if isinstance(value, dict):
        return [s for key, item in value.items() for s in [key, *strings(item)]]
    if isinstance(value, list):
        return [s for item in value for s in strings(item)]
    return [value] if isinstance(value, str) else []


def templates(template: dict[str, Any] = TEMPLATE) -> list[tuple[dict[str, Any], list[str]]]:
    """Each template scope (the main template, then every nested template with inner scope) with the strings
    whose expressions are evaluated in it. Inner-scope nested templates have their own parameters and
    variables; the parameter values passed to them are evaluated in the enclosing scope."""
    own: list[str] = []
    nested: list[tuple[dict[str, Any], list[str]]] = []
    for key, value in template.items():
        if key != "resources":
            own += strings(value)
    for resource in template.get("resources", []):
        body = resource.get("properties", {}).get("template")
        inner = resource.get("properties", {}).get("expressionEvaluationOptions", {}).get("scope") == "inner"
        if body is None or not inner:
            own += strings(resource)
            continue
        outer_part = {k: v for k, v in resource.items() if k != "properties"}
        outer_part["properties"] = {k: v for k, v in resource["properties"].items() if k != "template"}
        own += strings(outer_part)
        nested += templates(body)
    return [(template, own), *nested]


# --- evaluation against fake existing resources ------------------------------------------------------------

SUBSCRIPTION = "11111111-1111-1111-1111-111111111111"
TENANT = "22222222-2222-2222-2222-222222222222"
RESOURCE_GROUP = "rg-sentinel-bot"


def _fake_guid(*parts: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "/".join(parts)))


def fake_reference(resource_id: str) -> dict[str, Any]:
    """What reference() returns for the resources this template reads, shaped like Azure's answers."""
    provider = resource_id.split("/providers/", 1)[1].split("/")
    kind, name = "/".join(provider[:-1]), provider[-1]
    return {
        "Microsoft.ManagedIdentity/userAssignedIdentities": {
            "clientId": _fake_guid(resource_id, "client"), "principalId": _fake_guid(resource_id, "principal"),
            "tenantId": TENANT},
        "Microsoft.Insights/components": {
            "ConnectionString": f"InstrumentationKey={_fake_guid(resource_id)};"
                                "IngestionEndpoint=https://westeurope-5.in.applicationinsights.azure.com/"},
        "Microsoft.Web/sites": {"defaultHostName": f"{name}.azurewebsites.net"},
        "Microsoft.OperationalInsights/workspaces": {"customerId": _fake_guid(resource_id, "customer")},
        "Microsoft.CognitiveServices/accounts": {"endpoint": f"https://{name}.openai.azure.com/"},
    }[kind]


@dataclass
class Scope:
    template: dict[str, Any]
    parameters: dict[str, Any]
    subscription: str = SUBSCRIPTION
    resource_group: str = RESOURCE_GROUP
    copy_index: int | None = None
    _variables: dict[str, Any] = field(default_factory=dict)

    def variable(self, name: str) -> Any:
        if name not in self._variables:
            self._variables[name] = self.evaluate(self.template["variables"][name])
        return self._variables[name]

    def evaluate(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {self.evaluate(key): self.evaluate(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.evaluate(item) for item in value]
        if is_expression(value):
            return self.node(parse(value[1:-1]))
        return value[1:] if isinstance(value, str) and value.startswith("[[") else value

    def node(self, node: Any) -> Any:
        if isinstance(node, Literal):
            return node.value
        if isinstance(node, Member):
            return self.node(node.target)[node.name]
        if isinstance(node, Index):
            return self.node(node.target)[self.node(node.index)]
        if node.name == "if":  # only the chosen branch is evaluated, as in ARM
            return self.node(node.args[1] if self.node(node.args[0]) else node.args[2])
        return self.function(node.name, [self.node(arg) for arg in node.args])

    def function(self, name: str, args: list[Any]) -> Any:
        rg_id = f"/subscriptions/{self.subscription}/resourceGroups/{self.resource_group}"
        if name == "parameters":
            return self.parameters[args[0]]
        if name == "variables":
            return self.variable(args[0])
        if name == "format":
            return re.sub(r"\{(\d+)\}", lambda m: str(args[1 + int(m.group(1))]), args[0])
        if name == "concat":
            return [item for part in args for item in part] if isinstance(args[0], list) else "".join(map(str, args))
        if name == "resourceId":
            namespace, *types = args[0].split("/")
            names = zip(types, args[1:], strict=True)
            return f"{rg_id}/providers/{namespace}/" + "/".join(f"{t}/{n}" for t, n in names)
        if name == "subscriptionResourceId":
            return f"/subscriptions/{self.subscription}/providers/{args[0]}/{args[1]}"
        if name == "reference":
            assert len(args) >= 2, f"reference({args[0]}) needs an apiVersion (the resource may be outside it)"
            return fake_reference(args[0])
        simple = {
            "empty": lambda: len(args[0]) == 0, "not": lambda: not args[0], "equals": lambda: args[0] == args[1],
            "and": lambda: all(args), "greater": lambda: args[0] > args[1], "string": lambda: str(args[0]),
            "toLower": lambda: args[0].lower(), "trim": lambda: args[0].strip(),
            "split": lambda: args[0].split(args[1]), "length": lambda: len(args[0]),
            "uniqueString": lambda: hashlib.sha256("|".join(args).encode()).hexdigest()[:13],
            "guid": lambda: _fake_guid(*args), "copyIndex": lambda: self.copy_index + (args[0] if args else 0),
            "resourceGroup": lambda: {"id": rg_id, "name": self.resource_group, "location": "westeurope"},
            "subscription": lambda: {"id": f"/subscriptions/{self.subscription}",
                                     "subscriptionId": self.subscription, "tenantId": TENANT},
        }
        assert name in simple, f"ARM function {name}() is not one this test knows (add it, after checking ARM's docs)"
        return simple[name]()


@dataclass
class Deployed:
    resource: dict[str, Any]
    subscription: str
    resource_group: str


def parameters_for(template: dict[str, Any], given: dict[str, Any], scope: Scope) -> dict[str, Any]:
    values = {}
    for name, declaration in template.get("parameters", {}).items():
        if name in given:
            values[name] = given[name]
        else:
            assert "defaultValue" in declaration, f"parameter {name} is required but was not given"
            values[name] = scope.evaluate(declaration["defaultValue"])
        allowed = declaration.get("allowedValues")
        assert allowed is None or values[name] in allowed, f"{name}={values[name]!r} is not allowed"
    return values


def deploy(**overrides: Any) -> tuple[list[Deployed], dict[str, Any]]:
    """The resources (nested deployments expanded) and outputs of the template with the example parameters."""
    given = {name: spec["value"] for name, spec in EXAMPLE.items()} | overrides
    scope = Scope(TEMPLATE, {})
    scope.parameters = parameters_for(TEMPLATE, given, scope)
    deployed: list[Deployed] = []
    for resource in TEMPLATE["resources"]:
        count = scope.evaluate(resource["copy"]["count"]) if "copy" in resource else None
        for index in range(count) if count is not None else [None]:
            item = Scope(TEMPLATE, scope.parameters, copy_index=index)
            if not item.evaluate(resource.get("condition", True)):
                continue
            if resource["type"] == "Microsoft.Resources/deployments":
                deployed += _nested(resource, item)
            else:
                deployed.append(Deployed(item.evaluate(resource), SUBSCRIPTION, RESOURCE_GROUP))
    outputs = {name: scope.evaluate(output["value"]) for name, output in TEMPLATE["outputs"].items()}
    return deployed, outputs


def _nested(resource: dict[str, Any], outer: Scope) -> list[Deployed]:
    properties = resource["properties"]
    assert properties["expressionEvaluationOptions"]["scope"] == "inner"
    given = {name: outer.evaluate(spec["value"]) for name, spec in properties["parameters"].items()}
    inner = Scope(properties["template"], {}, subscription=outer.evaluate(resource["subscriptionId"]),
                  resource_group=outer.evaluate(resource["resourceGroup"]))
    inner.parameters = parameters_for(properties["template"], given, inner)
    return [Deployed(inner.evaluate(child), inner.subscription, inner.resource_group)
            for child in properties["template"]["resources"]]


def only(deployed: list[Deployed], resource_type: str) -> dict[str, Any]:
    found = [d.resource for d in deployed if d.resource["type"] == resource_type]
    assert len(found) == 1, f"expected one {resource_type}, found {len(found)}"
    return found[0]


def example_id(name: str) -> str:
    return EXAMPLE[name]["value"]


def identity_id(deployed: list[Deployed]) -> str:
    name = only(deployed, "Microsoft.ManagedIdentity/userAssignedIdentities")["name"]
    return (f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{RESOURCE_GROUP}/providers/"
            f"Microsoft.ManagedIdentity/userAssignedIdentities/{name}")


# --- the template ----------------------------------------------------------------------------------------

def test_template_is_an_arm_deployment_template() -> None:
    assert TEMPLATE["$schema"] == SCHEMA
    assert re.fullmatch(r"\d+\.\d+\.\d+\.\d+", TEMPLATE["contentVersion"])
    assert {"parameters", "variables", "resources", "outputs"} <= TEMPLATE.keys()
    for resource in TEMPLATE["resources"]:
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", resource["apiVersion"]), resource["type"]


def test_every_expression_parses_and_every_parameter_and_variable_it_names_is_declared() -> None:
    scopes = templates()
    assert len(scopes) == 2, "the main template and the role-assignment template"
    for template, texts in scopes:
        declared = {"parameters": set(template.get("parameters", {})), "variables": set(template.get("variables", {}))}
        used: dict[str, set[str]] = {"parameters": set(), "variables": set()}
        for text in filter(is_expression, texts):
            for call in calls(parse(text[1:-1])):
                if call.name in used:
                    assert len(call.args) == 1 and isinstance(call.args[0], Literal), text
                    used[call.name].add(call.args[0].value)
        for kind in used:
            assert used[kind] <= declared[kind], f"undeclared {kind}: {used[kind] - declared[kind]}"
            assert declared[kind] <= used[kind], f"declared but never used {kind}: {declared[kind] - used[kind]}"


def test_the_checker_sees_references_in_the_right_scope() -> None:
    inner = {"parameters": {"a": {"type": "string"}}, "resources": [{"name": "[parameters('a')]"}]}
    outer = {"parameters": {"b": {"type": "string"}}, "resources": [{
        "type": "Microsoft.Resources/deployments", "properties": {
            "expressionEvaluationOptions": {"scope": "inner"},
            "parameters": {"a": {"value": "[parameters('b')]"}}, "template": inner}}]}
    (_, outer_texts), (_, inner_texts) = templates(outer)
    assert "[parameters('b')]" in outer_texts and "[parameters('a')]" not in outer_texts
    assert "[parameters('a')]" in inner_texts and "[parameters('b')]" not in inner_texts
    assert parse("format('{0}-x', variables('v')[copyIndex()].id)") == Call("format", (
        Literal("{0}-x"), Member(Index(Call("variables", (Literal("v"),)), Call("copyIndex", ())), "id")))
    for broken in ("concat('a'", "parameters('a'))", "split('a', '/')[", "'unterminated"):
        with pytest.raises((ValueError, IndexError)):
            parse(broken)


# The Azure Bot's OAuth connection type "AAD v2 with Federated Credentials" (az bot authsetting: Aadv2WithFic): the
# Bot Framework token service signs in to the app registration with a federated credential, so on-behalf-of mode
# needs no secret either. Its provider id and parameter keys are those public templates deploying that type use;
# `az bot authsetting list-providers` is the authority (deploy/README.md).
FEDERATED_CONNECTION = "c00b44ab-5e16-c44c-af26-2fd5bc55eb18"
SECURE_TYPES = ("securestring", "secureobject")


def test_no_parameter_holds_a_secret() -> None:
    for template, _ in templates():
        for name, declaration in template.get("parameters", {}).items():
            assert declaration["type"].lower() not in SECURE_TYPES, name
            assert not SECRET_NAME.search(name) or name.endswith("ResourceId"), f"{name} sounds like a secret"
            assert not SECRET_VALUE.search(json.dumps(declaration.get("defaultValue", ""))), name
    for output in TEMPLATE["outputs"].values():
        assert output["type"].lower() not in ("securestring", "secureobject")
    for text in strings(TEMPLATE):
        if is_expression(text):
            # list*() functions (listKeys, listSecrets, listCredentials...) read keys and secrets.
            assert not [c for c in calls(parse(text[1:-1])) if c.name.lower().startswith("list")], text
        else:
            assert not SECRET_VALUE.search(text), text


def test_example_parameters_fill_the_template_and_hold_no_secret() -> None:
    raw = json.loads((DEPLOY / "azuredeploy.parameters.example.json").read_text())
    assert raw["$schema"].endswith("/deploymentParameters.json#")
    declared = TEMPLATE["parameters"]
    required = {name for name, spec in declared.items() if "defaultValue" not in spec}
    assert EXAMPLE.keys() <= declared.keys() and required <= EXAMPLE.keys()
    for name, spec in EXAMPLE.items():
        assert not SECRET_VALUE.search(json.dumps(spec["value"])), name
        assert not SECRET_NAME.search(name) or name.endswith("ResourceId"), name


def role_assignments(**overrides: Any) -> tuple[dict[tuple[str, str], Deployed], str]:
    deployed, _ = deploy(**overrides)
    found = {}
    for item in deployed:
        if item.resource["type"] == "Microsoft.Authorization/roleAssignments":
            role = item.resource["properties"]["roleDefinitionId"]
            found[(item.resource["scope"], role.rsplit("/", 1)[1])] = item
    return found, identity_id(deployed)


def test_role_assignments_use_the_documented_built_in_roles_on_each_resource() -> None:
    workspace, openai, registry = (example_id(name) for name in (
        "sentinelWorkspaceResourceId", "azureOpenAIResourceId", "containerRegistryResourceId"))
    relative = {rid: rid.split("/providers/", 1)[1] for rid in (workspace, openai, registry)}
    found, identity = role_assignments()
    assert set(found) == {(relative[workspace], LOG_ANALYTICS_READER), (relative[openai], OPENAI_USER),
                          (relative[registry], ACR_PULL)}
    principal = fake_reference(identity)["principalId"]
    for (scope, role), item in found.items():
        target = next(rid for rid, rel in relative.items() if rel == scope)
        # Deployed into the target's own subscription and resource group, for the bot's identity only.
        assert (item.subscription, item.resource_group) == (target.split("/")[2], target.split("/")[4])
        properties = item.resource["properties"]
        assert properties["principalId"] == principal
        assert properties["principalType"] == "ServicePrincipal"
        assert properties["roleDefinitionId"] == (
            f"/subscriptions/{item.subscription}/providers/Microsoft.Authorization/roleDefinitions/{role}")
        assert item.resource["name"] == _fake_guid(target, principal, role)
    sentinel, _ = role_assignments(workspaceReaderRole="MicrosoftSentinelReader", containerRegistryResourceId="")
    assert set(sentinel) == {(relative[workspace], SENTINEL_READER), (relative[openai], OPENAI_USER)}


def test_role_definition_ids_are_built_in_ids_built_with_subscription_resource_id() -> None:
    assert set(TEMPLATE["variables"]["roleDefinitionGuids"].values()) == {
        LOG_ANALYTICS_READER, SENTINEL_READER, OPENAI_USER, ACR_PULL, SENTINEL_RESPONDER, STORAGE_BLOB_CONTRIBUTOR,
        STORAGE_QUEUE_CONTRIBUTOR}
    assert set(TEMPLATE["parameters"]["workspaceReaderRole"]["allowedValues"]) <= set(
        TEMPLATE["variables"]["roleDefinitionGuids"])
    (inner,) = [resource["properties"]["template"] for resource in TEMPLATE["resources"]
                if resource["type"] == "Microsoft.Resources/deployments"]
    (assignment,) = inner["resources"]
    definition = parse(assignment["properties"]["roleDefinitionId"][1:-1])
    assert isinstance(definition, Call) and definition.name == "subscriptionResourceId"
    assert definition.args[0] == Literal("Microsoft.Authorization/roleDefinitions")
    assert parse(assignment["name"][1:-1]).name == "guid"


def test_blob_state_creates_a_keyless_storage_account_with_the_turn_queue_and_its_two_data_roles() -> None:
    deployed, _ = deploy(stateStore="blob", instanceCount=3)
    account = only(deployed, "Microsoft.Storage/storageAccounts")
    assert account["properties"]["allowSharedKeyAccess"] is False
    assert account["properties"]["minimumTlsVersion"] == "TLS1_2"
    children = {d.resource["name"].split("/", 1)[1] for d in deployed if d.resource["type"].startswith(
        "Microsoft.Storage/storageAccounts/")}
    assert children == {"default/bot-state", "default/bot-turns", "default/bot-turns-poison", "default"}
    assert only(deployed, "Microsoft.Web/serverfarms")["sku"]["capacity"] == 3
    found, _ = role_assignments(stateStore="blob", instanceCount=3)
    storage = account["name"]
    assert {role for (scope, role) in found if scope.endswith(f"storageAccounts/{storage}")} == {
        STORAGE_BLOB_CONTRIBUTOR, STORAGE_QUEUE_CONTRIBUTOR}
    settings, _ = app_settings(stateStore="blob", instanceCount=3)
    app = Settings.from_env(settings, dotenv_path=None)  # starts: durable turns, state reached as its identity
    assert (app.storage.state.kind, app.turns.queue, app.turns.instance_count) == ("blob", "azure", 3)
    assert app.storage.blob_account_url == f"https://{storage}.blob.core.windows.net"
    assert app.turns.queue_account_url == f"https://{storage}.queue.core.windows.net"
    assert app.storage.blob_connection_string is None
    assert not [d for d in deploy()[0] if d.resource["type"].startswith("Microsoft.Storage/")], "none for SQLite"


def test_sqlite_state_above_one_instance_is_refused() -> None:
    from bot.config import ConfigError

    settings, _ = app_settings(instanceCount=2)
    with pytest.raises(ConfigError, match="INSTANCE_COUNT=2 needs STATE_STORE=blob"):
        Settings.from_env(settings, dotenv_path=None)


def test_worker_processes_queue_turns_beside_the_state_and_the_web_process_only_checks_and_queues() -> None:
    app = Settings.from_env(app_settings()[0], dotenv_path=None)
    assert (app.turns.queue, app.turns.worker_processes, app.turns.web_runs_worker) == ("local", 0, True), (
        "default: durable, the turns queued beside the SQLite state and taken by the web process (issue 28)")
    local = Settings.from_env(app_settings(workerProcesses=2)[0], dotenv_path=None)
    assert (local.turns.queue, local.turns.queue_path, local.turns.worker_processes, local.turns.web_runs_worker) == (
        "local", "/app/.data/turns.db", 2, False), "SQLite state: the local queue on the same disk"
    shared = Settings.from_env(app_settings(workerProcesses=2, stateStore="blob", instanceCount=2)[0],
                               dotenv_path=None)
    assert (shared.turns.queue, shared.turns.worker_processes, shared.turns.web_runs_worker) == ("azure", 2, False)


RESPONDERS = "aaaaaaaa-1111-4111-8111-aaaaaaaaaaaa,bbbbbbbb-2222-4222-8222-bbbbbbbbbbbb"


def test_responder_role_is_granted_only_when_write_responders_are_given() -> None:
    workspace, openai = example_id("sentinelWorkspaceResourceId"), example_id("azureOpenAIResourceId")
    relative = workspace.split("/providers/", 1)[1]
    assert EXAMPLE["writeResponders"]["value"] == ""  # the example deploys a read-only bot
    for off in ({}, {"writeResponders": ""}, {"writeResponders": "  "}):
        found, _ = role_assignments(**off)
        assert not [role for _, role in found if role == SENTINEL_RESPONDER], off
        assert deploy(**off)[1]["writeActionsEnabled"] is False

    found, identity = role_assignments(writeResponders=RESPONDERS)
    read_only, _ = role_assignments()
    # Added next to the reader role (which is kept), on the workspace itself, nothing else changes.
    assert set(found) == set(read_only) | {(relative, SENTINEL_RESPONDER)}
    item = found[(relative, SENTINEL_RESPONDER)]
    assert (item.subscription, item.resource_group) == (workspace.split("/")[2], workspace.split("/")[4])
    principal = fake_reference(identity)["principalId"]
    properties = item.resource["properties"]
    assert properties["principalId"] == principal and properties["principalType"] == "ServicePrincipal"
    assert properties["roleDefinitionId"] == (
        f"/subscriptions/{item.subscription}/providers/Microsoft.Authorization/roleDefinitions/{SENTINEL_RESPONDER}")
    assert item.resource["name"] == _fake_guid(workspace, principal, SENTINEL_RESPONDER)
    assert deploy(writeResponders=RESPONDERS)[1]["writeActionsEnabled"] is True

    # The same with the Sentinel reader role and no registry: still exactly one Responder, on the workspace.
    other, _ = role_assignments(writeResponders=RESPONDERS, workspaceReaderRole="MicrosoftSentinelReader",
                                containerRegistryResourceId="")
    assert set(other) == {(relative, SENTINEL_READER), (relative, SENTINEL_RESPONDER),
                          (openai.split("/providers/", 1)[1], OPENAI_USER)}


def test_write_app_settings_follow_write_responders_and_start_the_app() -> None:
    workspace = example_id("sentinelWorkspaceResourceId")
    read_only, _ = app_settings()
    assert read_only["WRITE_ACTIONS_ENABLED"] == "false"
    assert all(read_only[name] == "" for name in (
        "WRITE_RESPONDERS", "SENTINEL_SUBSCRIPTION_ID", "SENTINEL_RESOURCE_GROUP", "SENTINEL_WORKSPACE_NAME"))
    app = Settings.from_env(read_only, dotenv_path=None)
    place = app.workspace
    assert not place.write_actions_enabled and not place.write_responders and not place.writes_configured

    given, _ = app_settings(writeResponders=f" {RESPONDERS} ")
    assert given["WRITE_ACTIONS_ENABLED"] == "true" and given["WRITE_RESPONDERS"] == RESPONDERS
    assert (given["SENTINEL_SUBSCRIPTION_ID"], given["SENTINEL_RESOURCE_GROUP"], given["SENTINEL_WORKSPACE_NAME"]) == (
        "00000000-0000-0000-0000-000000000000", "rg-sentinel", "law-sentinel")
    assert (f"/subscriptions/{given['SENTINEL_SUBSCRIPTION_ID']}/resourceGroups/{given['SENTINEL_RESOURCE_GROUP']}"
            f"/providers/Microsoft.OperationalInsights/workspaces/{given['SENTINEL_WORKSPACE_NAME']}") == workspace
    assert {name: value for name, value in given.items() if not name.startswith(("WRITE_", "SENTINEL_"))} == {
        name: value for name, value in read_only.items() if not name.startswith(("WRITE_", "SENTINEL_"))}
    assert given.keys() <= config_reads() | PLATFORM_SETTINGS

    app = Settings.from_env(given, dotenv_path=None)  # the app accepts it: writes on, against the real workspace
    assert app.workspace.write_actions_enabled and app.workspace.write_responders == frozenset(RESPONDERS.split(","))
    assert not app.workspace.uses_demo and app.workspace.writes_configured
    assert (app.workspace.subscription_id, app.workspace.resource_group, app.workspace.workspace_name) == (
        "00000000-0000-0000-0000-000000000000", "rg-sentinel", "law-sentinel")

    # A workspace in another subscription and resource group is named from its own resource id.
    elsewhere = ("/subscriptions/99999999-9999-4999-8999-999999999999/resourceGroups/rg-soc-prod/providers/"
                 "Microsoft.OperationalInsights/workspaces/law-soc")
    moved, _ = app_settings(writeResponders=RESPONDERS, sentinelWorkspaceResourceId=elsewhere)
    assert (moved["SENTINEL_SUBSCRIPTION_ID"], moved["SENTINEL_RESOURCE_GROUP"], moved["SENTINEL_WORKSPACE_NAME"]) == (
        "99999999-9999-4999-8999-999999999999", "rg-soc-prod", "law-soc")


def config_reads() -> set[str]:
    """The variable names bot/config.py reads (each section field's ``env()``)."""
    return {name for names in variables().values() for name in names}


def app_settings(**overrides: Any) -> tuple[dict[str, str], str]:
    deployed, _ = deploy(**overrides)
    site = only(deployed, "Microsoft.Web/sites")
    settings = {item["name"]: item["value"] for item in site["properties"]["siteConfig"]["appSettings"]}
    return settings, identity_id(deployed)


def test_app_settings_are_variables_the_app_reads_and_start_it_with_its_managed_identity() -> None:
    reads = config_reads()
    assert {"SENTINEL_WORKSPACE_ID", "MICROSOFT_APP_TYPE", "STATE_STORE", "HOST", "PORT"} <= reads  # parser sanity
    settings, identity = app_settings()
    assert settings.keys() <= reads | PLATFORM_SETTINGS, settings.keys() - reads - PLATFORM_SETTINGS
    assert {"HOST", "PORT", "WEBSITES_PORT", "SENTINEL_WORKSPACE_ID", "AZURE_OPENAI_ENDPOINT",
            "AZURE_OPENAI_DEPLOYMENT", "AZURE_OPENAI_API_VERSION", "MICROSOFT_APP_ID", "MICROSOFT_APP_TYPE",
            "MICROSOFT_APP_TENANT_ID", "AZURE_CLIENT_ID", "STATE_STORE", "APPLICATIONINSIGHTS_CONNECTION_STRING",
            "LOG_LEVEL"} <= settings.keys()
    assert not settings.keys() & SECRET_SETTINGS
    site = next(resource for resource in TEMPLATE["resources"] if resource["type"] == "Microsoft.Web/sites")
    for item in site["properties"]["siteConfig"]["appSettings"]:  # literal values, as written in the template
        assert is_expression(item["value"]) or not SECRET_VALUE.search(item["value"]), item["name"]

    app = Settings.from_env(settings, dotenv_path=None)  # raises ConfigError if the app would refuse to start
    assert settings["MICROSOFT_APP_TYPE"] == app.teams.app_type == "UserAssignedMSI"
    assert app.teams.app_id == settings["AZURE_CLIENT_ID"] == fake_reference(identity)["clientId"]
    assert app.teams.app_tenant_id == TENANT and app.teams.app_password is None and app.teams.authenticates_requests
    assert (app.teams.host, app.teams.port, settings["WEBSITES_PORT"]) == ("0.0.0.0", 8000, "8000")
    assert app.model.provider == "azure" and app.model.azure_api_key is None
    assert app.model.azure_endpoint == "https://aoai-soc.openai.azure.com"
    workspace = example_id("sentinelWorkspaceResourceId")
    assert app.workspace.workspace_id == fake_reference(workspace)["customerId"]
    assert app.storage.state.kind == "sqlite" and app.storage.state.path == "/app/.data/state.db"
    given, _ = app_settings(sentinelWorkspaceId="33333333-3333-3333-3333-333333333333",
                         azureOpenAIEndpoint="https://soc.openai.azure.com")
    assert given["SENTINEL_WORKSPACE_ID"] == "33333333-3333-3333-3333-333333333333"
    assert given["AZURE_OPENAI_ENDPOINT"] == "https://soc.openai.azure.com"


def test_web_app_is_always_on_https_only_health_checked_and_runs_the_bot_as_its_identity() -> None:
    deployed, _ = deploy()
    site = only(deployed, "Microsoft.Web/sites")
    config = site["properties"]["siteConfig"]
    assert site["properties"]["httpsOnly"] is True and config["alwaysOn"] is True
    assert config["healthCheckPath"] == "/healthz"
    assert 'add_get("/healthz"' in (ROOT / "bot" / "teams" / "server.py").read_text()
    assert config["minTlsVersion"] in ("1.2", "1.3") and config["ftpsState"] == "Disabled"
    assert config["appCommandLine"] == "python -m bot serve"
    assert config["linuxFxVersion"] == "DOCKER|" + EXAMPLE["containerImage"]["value"]
    identity = identity_id(deployed)
    assert site["identity"] == {"type": "UserAssigned", "userAssignedIdentities": {identity: {}}}
    assert config["acrUseManagedIdentityCreds"] is True  # pulls from the registry as the identity, no password
    assert config["acrUserManagedIdentityID"] == fake_reference(identity)["clientId"]
    public = only(deploy(containerRegistryResourceId="")[0], "Microsoft.Web/sites")
    assert public["properties"]["siteConfig"]["acrUseManagedIdentityCreds"] is False
    policies = {d.resource["name"]: d.resource["properties"]["allow"] for d in deployed
                if d.resource["type"] == "Microsoft.Web/sites/basicPublishingCredentialsPolicies"}
    assert policies == {f"{site['name']}/ftp": False, f"{site['name']}/scm": False}
    plan = only(deployed, "Microsoft.Web/serverfarms")
    assert plan["kind"] == "linux" and plan["properties"]["reserved"] is True
    assert not {"F1", "D1"} & set(TEMPLATE["parameters"]["appServicePlanSku"]["allowedValues"])  # no Always On


def test_bot_resource_uses_the_managed_identity_and_the_teams_channel() -> None:
    deployed, outputs = deploy()
    bot = only(deployed, "Microsoft.BotService/botServices")
    site = only(deployed, "Microsoft.Web/sites")
    identity = identity_id(deployed)
    properties = bot["properties"]
    assert bot["kind"] == "azurebot" and bot["location"] == "global"
    assert bot["sku"]["name"] in TEMPLATE["parameters"]["botSku"]["allowedValues"] == ["F0", "S1"]
    assert properties["msaAppType"] == "UserAssignedMSI"
    assert properties["msaAppId"] == fake_reference(identity)["clientId"] == outputs["botAppId"]
    assert properties["msaAppMSIResourceId"] == identity and properties["msaAppTenantId"] == TENANT
    assert properties["endpoint"] == f"https://{site['name']}.azurewebsites.net/api/messages"
    assert outputs["messagingEndpoint"] == properties["endpoint"]
    assert outputs["webAppHostName"] == f"{site['name']}.azurewebsites.net"
    channel = only(deployed, "Microsoft.BotService/botServices/channels")
    assert channel["name"] == f"{bot['name']}/MsTeamsChannel"
    assert channel["properties"]["channelName"] == "MsTeamsChannel"
    assert channel["properties"]["properties"]["isEnabled"] is True


def test_application_insights_is_workspace_based() -> None:
    deployed, _ = deploy()
    created = only(deployed, "Microsoft.OperationalInsights/workspaces")
    insights = only(deployed, "Microsoft.Insights/components")
    assert insights["properties"]["WorkspaceResourceId"].endswith(f"/workspaces/{created['name']}")
    sentinel = example_id("sentinelWorkspaceResourceId")
    deployed, _ = deploy(appInsightsWorkspaceResourceId=sentinel)
    assert not [d for d in deployed if d.resource["type"] == "Microsoft.OperationalInsights/workspaces"]
    assert only(deployed, "Microsoft.Insights/components")["properties"]["WorkspaceResourceId"] == sentinel


# --- Dockerfile and .dockerignore ------------------------------------------------------------------------

def dockerfile() -> list[tuple[str, str]]:
    """The Dockerfile's instructions as (KEYWORD, arguments), continuation lines joined."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1].strip())
            for line in map(str.strip, text.splitlines()) if line and not line.startswith("#")]


def test_dockerfile_runs_the_bot_as_a_non_root_user_with_cached_encodings() -> None:
    steps = dockerfile()
    keywords = [k for k, _ in steps]
    assert steps[0] == ("FROM", "python:3.11-slim")
    env = dict(pair.split("=", 1) for k, args in steps if k == "ENV" for pair in shlex.split(args))
    assert env["HOST"] == "0.0.0.0" and env["PORT"] == "8000" == TEMPLATE["variables"]["containerPort"]
    assert ("EXPOSE", env["PORT"]) in steps
    assert json.loads(dict(steps)["CMD"]) == ["python", "-m", "bot", "serve"] and keywords[-1] == "CMD"

    users = [(i, args) for i, (k, args) in enumerate(steps) if k == "USER"]
    assert users and users[-1][0] < keywords.index("CMD")
    assert users[-1][1].split(":")[0] not in ("root", "0")

    # The tokenizer the bot uses is fetched into TIKTOKEN_CACHE_DIR at build time, after the variable is set.
    encoding = inspect.signature(TokenCounter.__init__).parameters["encoding"].default
    fetch = next(i for i, (k, args) in enumerate(steps) if k == "RUN" and f"get_encoding('{encoding}')" in args)
    assert env["TIKTOKEN_CACHE_DIR"].startswith("/") and keywords.index("ENV") < fetch

    # The state folder of the template's default STATE_STORE is the one the unprivileged user owns.
    state_dir = os.path.dirname(TEMPLATE["parameters"]["stateStore"]["defaultValue"].removeprefix("sqlite:///"))
    runs = [args for k, args in steps if k == "RUN"]
    assert any(f"mkdir -p {state_dir}" in run and f"chown bot:bot {state_dir}" in run for run in runs)
    assert any(f"useradd --system --uid {users[-1][1].split(':')[0]} " in run for run in runs)

    health = dict(steps)["HEALTHCHECK"]
    assert "/healthz" in health and "CMD" in health


def test_dockerfile_leaves_out_only_test_tools_the_bot_never_imports() -> None:
    install = next(args for k, args in dockerfile() if k == "RUN" and "requirements.lock" in args)
    assert "--require-hashes" in install
    locked = {line.split("==")[0].lower() for line in (ROOT / "requirements.lock").read_text().splitlines()
              if "==" in line and not line.startswith((" ", "#"))}
    requirements = (ROOT / "requirements.txt").read_text()
    pinned = {line.split("==")[0] for line in requirements.split() if "==" in line}
    left_out = {name for name in pinned if name.lower() not in locked}
    tests_section = requirements.split("# Tests", 1)[1]
    assert left_out <= {line.split("==")[0] for line in tests_section.split() if "==" in line}
    imported = set()
    for path in (ROOT / "bot").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module.split(".")[0])
    assert {"botbuilder", "tiktoken", "openai"} <= imported
    assert not {name.replace("-", "_") for name in left_out} & imported


def _glob(pattern: str) -> re.Pattern[str]:
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        else:
            out += {"*": "[^/]*", "?": "[^/]"}.get(pattern[i], re.escape(pattern[i]))
            i += 1
    return re.compile(out)


def docker_context_includes(path: str, patterns: list[str]) -> bool:
    """Docker's .dockerignore rule: the last pattern matching the path or one of its parent folders wins."""
    excluded = False
    parents = ["/".join(path.split("/")[:n]) for n in range(1, path.count("/") + 2)]
    for raw in patterns:
        negated = raw.startswith("!")
        regex = _glob(raw.removeprefix("!").strip("/"))
        if any(regex.fullmatch(parent) for parent in parents):
            excluded = not negated
    return not excluded


def test_dockerignore_sends_only_the_bot_and_its_requirements() -> None:
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    for path in (".venv/bin/python", ".data/state.db", ".env", ".git/HEAD", "node_modules/x/index.js",
                 "tests/e2e/node_modules/x/package.json", "tests/house/test_deploy.py", "bench/bench_teams.py",
                 "deploy/azuredeploy.json", "appPackage/manifest.json", "bot/__pycache__/app.cpython-311.pyc",
                 "bot/.env", "devTools/playground/x"):
        assert not docker_context_includes(path, patterns), path
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    sent = {p for p in tracked if docker_context_includes(p, patterns)}
    assert sent == {p for p in tracked if p.startswith("bot/") or p in ("pyproject.toml", "requirements.lock")}
    copied = [args.split()[0] for k, args in dockerfile() if k == "COPY"]
    assert copied == ["requirements.lock", "pyproject.toml", "bot/"]


# --- deploy.sh -------------------------------------------------------------------------------------------

FAKE_AZ = r"""#!/usr/bin/env bash
echo "$*" >> "$AZ_LOG"
case "$1 $2" in
  "account show") [ "$AZ_SIGNED_IN" = 1 ] || { echo "ERROR: Please run 'az login' to setup account." >&2; exit 1; }
                  printf 'Contoso SOC\t11111111-1111-1111-1111-111111111111\n' ;;
  "group show") case "$*" in *"--name rg-missing"*) exit 3 ;; esac ;;
  "acr show") case "$*" in *loginServer*) echo crsoc.azurecr.io ;; *) echo "$REGISTRY_ID" ;; esac ;;
  "acr build") ;;
  "deployment group")
    case "$3 $*" in
      create*) ;;
      *botAppId*) echo 44444444-4444-4444-4444-444444444444 ;;
      *webAppHostName*) echo sentinelbot-abc.azurewebsites.net ;;
      *messagingEndpoint*) echo https://sentinelbot-abc.azurewebsites.net/api/messages ;;
      *webAppName*) echo sentinelbot-abc ;;
      *ssoAppId*) echo "${SSO_APP_ID:-}" ;;
      *ssoUniqueIdentifier*) echo sentinelbot-bot-abc-sentinel-sso ;;
      *) exit 98 ;;
    esac ;;
  *) echo "unexpected az call: $*" >&2; exit 99 ;;
esac
"""
REGISTRY_ID = "/subscriptions/1/resourceGroups/rg-shared/providers/Microsoft.ContainerRegistry/registries/crsoc"


@pytest.fixture
def fake_az(tmp_path: Path) -> dict[str, Any]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "az").write_text(FAKE_AZ)
    (bin_dir / "az").chmod(0o755)
    parameters = tmp_path / "parameters.json"
    example = json.loads((DEPLOY / "azuredeploy.parameters.example.json").read_text())
    parameters.write_text(json.dumps(example).replace("00000000-0000-0000-0000-000000000000",
                                                      "55555555-5555-5555-5555-555555555555"))
    log = tmp_path / "az.log"
    env = os.environ | {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "AZ_LOG": str(log),
                        "AZ_SIGNED_IN": "1", "REGISTRY_ID": REGISTRY_ID}

    def run(*args: str, **extra_env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", str(DEPLOY / "deploy.sh"), *args], env=env | extra_env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=60)

    return {"run": run, "parameters": str(parameters), "log": log}


def az_calls(fake: dict[str, Any]) -> list[str]:
    return fake["log"].read_text().splitlines() if fake["log"].exists() else []


def test_deploy_script_deploys_the_template_and_prints_the_next_step(fake_az: dict[str, Any]) -> None:
    result = fake_az["run"]("-g", "rg-bot", "-p", fake_az["parameters"], "--name", "d1")
    assert result.returncode == 0, result.stderr
    create = next(c for c in az_calls(fake_az) if c.startswith("deployment group create"))
    assert create == (f"deployment group create --resource-group rg-bot --name d1 --template-file "
                      f"{DEPLOY / 'azuredeploy.json'} --parameters @{fake_az['parameters']} --output none")
    assert not any(c.startswith("acr") for c in az_calls(fake_az))
    assert ("python -m bot package --app-id 44444444-4444-4444-4444-444444444444 "
            "--domain sentinelbot-abc.azurewebsites.net\n") in result.stdout
    assert "https://sentinelbot-abc.azurewebsites.net/api/messages" in result.stdout
    sso = fake_az["run"]("-g", "rg-bot", "-p", fake_az["parameters"], SSO_APP_ID="7d6c5b4a-3f2e-4d1c-9b8a-7f6e5d4c3b2a")
    assert ("--domain sentinelbot-abc.azurewebsites.net --sso-app-id 7d6c5b4a-3f2e-4d1c-9b8a-7f6e5d4c3b2a"
            in sso.stdout and "admin consent" in sso.stdout), "on-behalf-of: the package gets single sign-on"
    assert "subject ending in /sentinelbot-bot-abc-sentinel-sso" in sso.stdout, "the token service's credential"


def test_deploy_script_can_build_the_image_in_the_registry_first(fake_az: dict[str, Any]) -> None:
    result = fake_az["run"]("-g", "rg-bot", "-p", fake_az["parameters"], "--acr", "crsoc", "--tag", "t1")
    assert result.returncode == 0, result.stderr
    calls_made = az_calls(fake_az)
    assert f"acr build --registry crsoc --image sentinel-teams-bot:t1 --file {ROOT / 'Dockerfile'} {ROOT}" in calls_made
    create = next(c for c in calls_made if c.startswith("deployment group create"))
    assert create.endswith(f"--parameters @{fake_az['parameters']} containerImage=crsoc.azurecr.io/"
                           f"sentinel-teams-bot:t1 containerRegistryResourceId={REGISTRY_ID} --output none")


@pytest.mark.parametrize("case", ["signed out", "missing group", "placeholders", "no arguments"])
def test_deploy_script_stops_before_deploying_when_something_is_missing(fake_az: dict[str, Any], case: str) -> None:
    parameters = fake_az["parameters"]
    if case == "placeholders":
        parameters = str(DEPLOY / "azuredeploy.parameters.example.json")
    group = "rg-missing" if case == "missing group" else "rg-bot"
    args = [] if case == "no arguments" else ["-g", group, "-p", parameters]
    result = fake_az["run"](*args, AZ_SIGNED_IN="0" if case == "signed out" else "1")
    assert result.returncode != 0
    assert not any(c.startswith("deployment") for c in az_calls(fake_az))
    expected = {"signed out": "az login", "missing group": "az group create", "placeholders": "placeholder",
                "no arguments": "usage:"}[case]
    assert expected in result.stderr


def test_deploy_script_is_strict_and_holds_no_secrets() -> None:
    script = (DEPLOY / "deploy.sh").read_text()
    assert script.startswith("#!/usr/bin/env bash\n")
    assert re.search(r"^set -euo pipefail$", script, re.MULTILINE)
    assert subprocess.run(["bash", "-n", str(DEPLOY / "deploy.sh")], capture_output=True).returncode == 0
    assert not re.search(r"password|secret=|--sdk-auth|AccountKey|listKeys|--client-secret|admin-enabled",
                         script, re.IGNORECASE)


def test_deploy_readme_cites_the_role_ids_and_offers_the_button() -> None:
    readme = (DEPLOY / "README.md").read_text()
    for role in (LOG_ANALYTICS_READER, SENTINEL_READER, OPENAI_USER, ACR_PULL, SENTINEL_RESPONDER):
        assert role in readme
    for name in ("writeResponders", "WRITE_ACTIONS_ENABLED", "WRITE_RESPONDERS", "SENTINEL_WORKSPACE_NAME"):
        assert name in readme
    assert "learn.microsoft.com/azure/role-based-access-control/built-in-roles" in readme
    assert "https://portal.azure.com/#create/Microsoft.Template/uri/" in readme
    assert "APPLICATIONINSIGHTS_CONNECTION_STRING" in readme


def test_on_behalf_of_is_off_by_default_and_needs_no_secret() -> None:
    deployed, outputs = deploy()
    assert not [d for d in deployed if d.resource["type"] == "Microsoft.BotService/botServices/connections"]
    settings, _ = app_settings()
    assert settings["QUERY_IDENTITY"] == "bot" and settings["SSO_APP_ID"] == "" and outputs["onBehalfOf"] is False
    assert Settings.from_env(settings, dotenv_path=None).access.query_identity == "bot"
    secure = [name for template, _ in templates() for name, declaration in template.get("parameters", {}).items()
              if declaration["type"].lower() in SECURE_TYPES]
    assert secure == [], "no secret parameter, on-behalf-of or not"
    connection = next(r for r in TEMPLATE["resources"] if r["type"] == "Microsoft.BotService/botServices/connections")
    assert "clientSecret" not in connection["properties"]
    assert not [text for text in strings(TEMPLATE) if "secret" in text.lower() and is_expression(text)]


def test_on_behalf_of_adds_a_federated_oauth_connection_and_the_settings_the_app_accepts() -> None:
    sso_app = "7d6c5b4a-3f2e-4d1c-9b8a-7f6e5d4c3b2a"
    deployed, outputs = deploy(ssoAppId=f" {sso_app} ")
    bot = only(deployed, "Microsoft.BotService/botServices")
    connection = only(deployed, "Microsoft.BotService/botServices/connections")
    identity = identity_id(deployed)
    resource = f"api://botid-{fake_reference(identity)['clientId']}"
    assert connection["name"] == f"{bot['name']}/sentinel-sso" and connection["location"] == "global"
    properties = connection["properties"]
    assert properties["serviceProviderId"] == FEDERATED_CONNECTION
    assert properties["serviceProviderDisplayName"] == "AAD v2 with Federated Credentials"
    assert "clientSecret" not in properties
    assert properties["clientId"] == sso_app and properties["scopes"] == f"{resource}/access_as_user"
    unique = f"{bot['name']}-sentinel-sso"  # the last segment of the token service's federated subject
    assert {p["key"]: p["value"] for p in properties["parameters"]} == {
        "ClientId": sso_app, "TenantId": TENANT, "UniqueIdentifier": unique, "TokenExchangeUrl": resource}
    assert outputs["onBehalfOf"] is True and outputs["ssoResource"] == resource
    assert outputs["ssoUniqueIdentifier"] == unique == deploy()[1]["ssoUniqueIdentifier"], (
        "known from the first deployment, before the registration's federated credential is created")
    settings, _ = app_settings(ssoAppId=sso_app)
    assert (settings["QUERY_IDENTITY"], settings["SSO_APP_ID"], settings["SSO_CONNECTION_NAME"]) == (
        "user", sso_app, "sentinel-sso")
    app = Settings.from_env(settings, dotenv_path=None)  # on-behalf-of through the managed identity: no secret
    assert app.access.query_identity == "user" and app.access.sso_app_id == sso_app
    assert app.access.sso_client_secret is None


def test_on_behalf_of_with_a_connection_managed_outside_the_template() -> None:
    """The documented fallback: a connection you create yourself (with a secret, where the federated type cannot
    serve) under ssoConnectionName; the template leaves it alone and still configures the app."""
    sso_app = "7d6c5b4a-3f2e-4d1c-9b8a-7f6e5d4c3b2a"
    deployed, outputs = deploy(ssoAppId=sso_app, ssoConnection="manual")
    assert not [d for d in deployed if d.resource["type"] == "Microsoft.BotService/botServices/connections"]
    settings, _ = app_settings(ssoAppId=sso_app, ssoConnection="manual")
    assert (settings["QUERY_IDENTITY"], settings["SSO_CONNECTION_NAME"]) == ("user", "sentinel-sso")
    assert outputs["onBehalfOf"] is True
