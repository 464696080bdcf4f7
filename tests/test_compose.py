"""docker-compose.yml checked against the code, without Docker.

* Every service whose command starts with ``streamctl`` names a real subcommand, and its
  arguments parse with that subcommand's own parameters (unknown options and bad values
  fail), read from the typer app itself.
* Every ``STREAMCTL_*``/``TEMPORAL_*`` variable set on a service built from the project's
  Dockerfile is one the code reads: a literal (or a module constant) that ``streamctl/**/*.py``
  passes to ``os.environ.get``/``os.environ[...]``/``getenv``/``in os.environ``, or a
  ``TEMPORAL_*`` name that changes the profile Temporal's env-config loads (asked of the SDK,
  whose reading of the environment lives in its Rust core, so no list of names is kept here).
* Secrets are never literal in the file; the Temporal server gets the dev server's dynamic
  config and the coordinator's search attributes, as ``streamctl up`` gives them.
* The README's distributed section names every service.

Each check returns its problems as text, and a test feeds it a broken copy of the file, so a
check that could not fail would show.
"""

from __future__ import annotations

import ast
import copy
import itertools
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
import typer.main
import yaml

from streamctl.cli import app
from streamctl.worker.search_attributes import dev_server_arguments
from streamctl.worker.temporal_server import dev_server_command

pytestmark = pytest.mark.quick

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "docker-compose.yml"
README_SECTION = "From the embedded default to a distributed deployment"
CHECKED_PREFIXES = ("STREAMCTL_", "TEMPORAL_")
SECRETS = ("STREAMCTL_PAYLOAD_KEY", "STREAMCTL_GATEWAY_TOKEN")

Compose = dict[str, Any]


def load_compose() -> Compose:
    compose: Compose = yaml.safe_load(COMPOSE_FILE.read_text())
    return compose


def project_services(compose: Compose) -> dict[str, dict[str, Any]]:
    """The services that run the project's image (built from its Dockerfile)."""
    return {name: s for name, s in compose["services"].items() if "build" in s}


def command_words(service: dict[str, Any]) -> list[str]:
    command = service.get("command") or []
    return shlex.split(command) if isinstance(command, str) else [str(w) for w in command]


# --- commands -------------------------------------------------------------------------------


def command_group(command: Any) -> bool:
    return isinstance(getattr(command, "commands", None), dict)


def command_problems(compose: Compose) -> list[str]:
    """Each ``streamctl ...`` command: a real (sub)command whose parameters parse its
    arguments."""
    root = typer.main.get_command(app)
    problems = []
    for name, service in compose["services"].items():
        words = command_words(service)
        if not words or words[0] != "streamctl":
            continue
        # typer 0.29 vendors its own click, whose groups are no ``click.Group``: a command
        # with subcommands is one with a ``commands`` mapping.
        command: Any = root
        arguments = words[1:]
        while command_group(command) and arguments and not arguments[0].startswith("-"):
            sub = command.commands.get(arguments[0])
            if sub is None:
                problems.append(f"{name}: streamctl has no command {arguments[0]!r}")
                break
            command, arguments = sub, arguments[1:]
        else:
            if command_group(command):
                problems.append(f"{name}: {' '.join(words)} names no subcommand")
                continue
            try:
                command.make_context(" ".join(words[:2]), list(arguments))
            except typer.TyperException as error:  # click's usage errors and bad parameters
                problems.append(f"{name}: {' '.join(words)}: {error}")
    return problems


def test_streamctl_services_run_real_commands() -> None:
    compose = load_compose()
    commands = {
        tuple(command_words(s)[:2])
        for s in compose["services"].values()
        if command_words(s)[:1] == ["streamctl"]
    }
    assert commands == {
        ("streamctl", "coordinator"),
        ("streamctl", "agent"),
        ("streamctl", "gateway"),
    }
    assert command_problems(compose) == []


def test_spark_nodes_run_the_spark_class_of_the_installed_pyspark() -> None:
    # The image installs the same pyproject as this environment, so the script is there too.
    spark_class = Path(sys.executable).parent / "spark-class"
    nodes = [
        command_words(s) for s in project_services(load_compose()).values() if s.get("command")
    ]
    spark = [words for words in nodes if words[0] == "spark-class"]
    assert {words[1] for words in spark} == {
        "org.apache.spark.deploy.master.Master",
        "org.apache.spark.deploy.worker.Worker",
    }
    assert spark_class.exists()


# --- environment ----------------------------------------------------------------------------


_ENVIRON = re.compile(r"\benviron\b")


def _module_constants(tree: ast.Module) -> dict[str, str]:
    constants = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            constants.update({t.id: value.value for t in targets if isinstance(t, ast.Name)})
    return constants


def environment_reads(tree: ast.Module) -> set[str]:
    """The variable names a module reads from the environment."""
    constants = _module_constants(tree)

    def name(node: ast.expr) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            return constants.get(node.id)
        return None

    found: list[str | None] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            if (
                isinstance(func, ast.Attribute)
                and func.attr == "get"
                and _ENVIRON.search(ast.unparse(func.value))
            ) or (
                (isinstance(func, ast.Name) and func.id == "getenv")
                or (isinstance(func, ast.Attribute) and func.attr == "getenv")
            ):
                found.append(name(node.args[0]))
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Load)
            and _ENVIRON.search(ast.unparse(node.value))
        ):
            found.append(name(node.slice))
        elif (
            isinstance(node, ast.Compare)
            and isinstance(node.ops[0], ast.In | ast.NotIn)
            and _ENVIRON.search(ast.unparse(node.comparators[0]))
        ):
            found.append(name(node.left))
    return {n for n in found if n}


def code_reads() -> set[str]:
    names: set[str] = set()
    for path in sorted((ROOT / "streamctl").rglob("*.py")):
        names |= environment_reads(ast.parse(path.read_text(), str(path)))
    return names


def temporal_env_config_reads(variable: str, value: str) -> bool:
    """Whether Temporal's env-config (as ``streamctl.config.temporal_profile`` loads it) takes
    anything from ``variable``."""
    from temporalio.envconfig import ClientConfigProfile

    def profile(env: dict[str, str]) -> Any:
        return ClientConfigProfile.load(disable_file=True, override_env_vars=env).to_dict()

    probe = "probe" if "${" in value else value
    return bool(profile({variable: probe}) != profile({}))


def environment_problems(compose: Compose, read: set[str]) -> list[str]:
    problems = []
    for name, service in project_services(compose).items():
        environment = service.get("environment") or {}
        assert isinstance(environment, dict), f"{name}: environment as a mapping, please"
        for variable, value in environment.items():
            if not variable.startswith(CHECKED_PREFIXES) or variable in read:
                continue
            if variable.startswith("TEMPORAL_") and temporal_env_config_reads(variable, str(value)):
                continue
            problems.append(f"{name}: {variable} is read by neither streamctl nor env-config")
        for secret in SECRETS:
            value = str(environment.get(secret, ""))
            if value and not value.startswith(f"${{{secret}:?"):
                problems.append(f"{name}: {secret} must come from .env (${{{secret}:?...}})")
    return problems


def test_every_variable_set_is_one_the_code_reads() -> None:
    read = code_reads()
    # The scan finds what streamctl/config.py documents.
    assert {"STREAMCTL_PAYLOAD_KEY", "STREAMCTL_CATALOG_URL", "TEMPORAL_PROFILE"} <= read
    assert "STREAMCTL_SPARK_KAFKA_JARS" in read  # through a module constant
    assert environment_problems(load_compose(), read) == []


def test_every_streamctl_service_shares_the_payload_key_and_temporal_settings() -> None:
    services = {
        name: s
        for name, s in load_compose()["services"].items()
        if command_words(s)[:1] == ["streamctl"]
    }
    keys = {s["environment"].get("STREAMCTL_PAYLOAD_KEY") for s in services.values()}
    assert len(keys) == 1 and None not in keys
    addresses = {s["environment"].get("TEMPORAL_ADDRESS") for s in services.values()}
    assert addresses == {"temporal:7233"}
    for name in ("coordinator", "agent-a1", "agent-a2"):
        assert services[name]["environment"]["STREAMCTL_METRICS_PORT"], name
    assert "STREAMCTL_GATEWAY_TOKEN" in services["gateway"]["environment"]
    assert "STREAMCTL_CATALOG_URL" in services["coordinator"]["environment"]
    example = (ROOT / ".env.example").read_text()
    for secret in SECRETS:  # documented, and empty: no secret is committed
        assert re.search(rf"^{secret}=$", example, re.MULTILINE), secret


# --- the Temporal server --------------------------------------------------------------------


def test_temporal_gets_the_dev_server_dynamic_config() -> None:
    command = dev_server_command(Path("temporal.db"), 7233, None)
    expected = {
        key: yaml.safe_load(value)
        for flag, pair in itertools.pairwise(command)
        if flag == "--dynamic-config-value"
        for key, value in [pair.split("=", 1)]
    }
    temporal = load_compose()["services"]["temporal"]
    mounted = next(v for v in temporal["volumes"] if v.endswith("/streamctl.yaml:ro"))
    assert temporal["environment"]["DYNAMIC_CONFIG_FILE_PATH"] == (
        "config/dynamicconfig/streamctl.yaml"
    )
    dynamic = yaml.safe_load((ROOT / mounted.split(":")[0]).read_text())
    assert {key: entries[0]["value"] for key, entries in dynamic.items()} == expected


def test_the_one_shot_registers_the_coordinators_search_attributes() -> None:
    services = load_compose()["services"]
    script = " ".join(command_words(services["temporal-search-attributes"]))
    registered = set(re.findall(r"\bStreamctl\w+=\w+", script))
    assert registered == set(dev_server_arguments()[1::2])
    condition = services["coordinator"]["depends_on"]["temporal-search-attributes"]
    assert condition == {"condition": "service_completed_successfully"}


# --- README ---------------------------------------------------------------------------------


def readme_problems(compose: Compose, readme: str) -> list[str]:
    match = re.search(
        rf"^(#+) {re.escape(README_SECTION)}\n(.*?)(?=^#{{1,2}} |\Z)", readme, re.S | re.M
    )
    if match is None:
        return [f"README has no section {README_SECTION!r}"]
    section = match.group(2)
    return [
        f"the README's distributed section does not mention service {name!r}"
        for name in compose["services"]
        if f"`{name}`" not in section
    ]


def test_readme_section_names_every_service() -> None:
    assert readme_problems(load_compose(), (ROOT / "README.md").read_text()) == []


# --- the checks can fail --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("break_it", "problem"),
    [
        (
            lambda c: c["services"]["agent-a1"]["environment"].update(STREAMCTL_CATALOG_ULR="x"),
            "agent-a1: STREAMCTL_CATALOG_ULR is read by neither",
        ),
        (
            lambda c: c["services"]["coordinator"]["environment"].update(TEMPORAL_ADRESS="x"),
            "coordinator: TEMPORAL_ADRESS is read by neither",
        ),
        (
            lambda c: c["services"]["gateway"]["environment"].update(
                STREAMCTL_GATEWAY_TOKEN="hunter2"
            ),
            "gateway: STREAMCTL_GATEWAY_TOKEN must come from .env",
        ),
    ],
)
def test_a_broken_environment_is_reported(break_it: Any, problem: str) -> None:
    compose = copy.deepcopy(load_compose())
    break_it(compose)
    problems = environment_problems(compose, code_reads())
    assert any(p.startswith(problem) for p in problems), problems


@pytest.mark.parametrize(
    ("command", "problem"),
    [
        (["streamctl", "coordinatr"], "streamctl has no command 'coordinatr'"),
        (["streamctl", "agent", "--name", "a1", "--mastr", "spark://m:7077"], "--mastr"),
        (["streamctl", "agent", "--name", "a1", "--capacity", "0"], "greater than or equal to 1"),
        (["streamctl", "agent"], "Missing parameter: name"),
        (["streamctl", "schedule"], "names no subcommand"),
    ],
)
def test_a_broken_command_is_reported(command: list[str], problem: str) -> None:
    compose = copy.deepcopy(load_compose())
    compose["services"]["agent-a1"]["command"] = command
    problems = command_problems(compose)
    assert len(problems) == 1 and problem in problems[0], problems


def test_a_service_missing_from_the_readme_is_reported() -> None:
    compose = copy.deepcopy(load_compose())
    compose["services"]["spark-worker-3"] = {}
    assert readme_problems(compose, (ROOT / "README.md").read_text()) == [
        "the README's distributed section does not mention service 'spark-worker-3'"
    ]


def test_the_batching_defaults_are_the_codes() -> None:
    """The file's fallbacks for the two knobs a user must know are the code's defaults (one
    home: streamctl.config), so a compose deployment runs as ``streamctl up`` does."""
    from streamctl import config

    text = COMPOSE_FILE.read_text()
    fallbacks = dict(re.findall(r"\$\{(STREAMCTL_BATCH_(?:SIZE|TIMEOUT)):-([^}]*)\}", text))
    assert fallbacks == {
        "STREAMCTL_BATCH_SIZE": str(config.DEFAULT_BATCH_SIZE),
        "STREAMCTL_BATCH_TIMEOUT": str(config.DEFAULT_BATCH_TIMEOUT),
    }
