"""Checks the Helm chart offline: lint, the values schema, rendering with the default values, with
a production-like values file and with Python graphs, Kubernetes schema validation of every
rendered manifest, and the invariants the chart promises (non-root, read-only root filesystem, no
service-account token, a worker's grace period above its drain timeout, the migration hook, the
06:00 purchasing pass, Python graphs' image and settings on the api and their workers only).
Run by `charts/check` (which sets up the tools); exits non-zero on the first failure."""

import os
import subprocess
import sys
import tempfile

import helm_python as helm
import yaml

CHART = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mostrador")
PRODUCTION = os.path.join(CHART, "ci", "production-values.yaml")
PYTHON = os.path.join(CHART, "ci", "python-values.yaml")
RETAIL = {"tienda", "cliente", "compras", "fichas"}
CUSTOM_KINDS = {"ServiceMonitor"}


def render(values):
    chart = helm.Chart.load(CHART)
    chart.validate_schema(values)
    manifests = chart.render(values, name="mostrador", namespace="tiendas", is_install=True)
    docs = []
    for path, text in sorted(manifests.items()):
        for doc in yaml.safe_load_all(text):
            if doc:
                docs.append((path, doc))
    return docs


def validate(docs, label):
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for i, (path, doc) in enumerate(docs):
            if doc["kind"] in CUSTOM_KINDS:
                continue
            name = os.path.join(tmp, f"{i:03d}-{doc['kind']}.yaml")
            with open(name, "w") as f:
                yaml.safe_dump(doc, f)
            files.append(name)
        result = subprocess.run(
            ["kubernetes-validate", "--strict", "--quiet", "-k", "1.30.0", *files],
            capture_output=True, text=True,
        )
        if result.returncode != 0:
            sys.exit(f"{label}: kubernetes-validate failed:\n{result.stdout}{result.stderr}")
    print(f"{label}: {len(files)} manifests valid against Kubernetes 1.30 (strict)")


def env_of(container):
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def check_invariants(docs, label, graphs=RETAIL):
    kinds = [doc["kind"] for _, doc in docs]
    for kind in ["Deployment", "Service", "PodDisruptionBudget", "Job", "CronJob"]:
        assert kind in kinds, (label, kind, kinds)
    workers = {}
    for _, doc in docs:
        kind = doc["kind"]
        if kind in ("Deployment", "Job", "CronJob"):
            pod = doc["spec"]["template"]["spec"] if kind != "CronJob" else doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]
            name = doc["metadata"]["name"]
            assert pod["automountServiceAccountToken"] is False, name
            assert pod["securityContext"]["runAsNonRoot"] is True, name
            for container in pod["containers"]:
                security = container["securityContext"]
                assert security["readOnlyRootFilesystem"] is True, name
                assert security["allowPrivilegeEscalation"] is False, name
                for e in container.get("env", []):
                    assert not (e["name"] in ("MOSTRADOR_DATABASE_URL", "MOSTRADOR_JWT_SECRET", "MODEL_API_KEY") and "value" in e), \
                        f"{name}: {e['name']} must come from a Secret"
            if kind == "Deployment" and doc["metadata"]["labels"].get("app.kubernetes.io/component") == "worker":
                container = pod["containers"][0]
                env = env_of(container)
                drain = int(env["MOSTRADOR_DRAIN_TIMEOUT"].rstrip("s"))
                assert pod["terminationGracePeriodSeconds"] > drain, name
                assert env["MOSTRADOR_GRACE_PERIOD"] == f"{pod['terminationGracePeriodSeconds']}s", name
                assert container["readinessProbe"]["httpGet"]["path"] == "/ready", name
                assert container["livenessProbe"]["httpGet"]["path"] == "/live", name
                workers[env["MOSTRADOR_GRAPHS"]] = (doc["spec"]["replicas"], env["MOSTRADOR_MAX_RUNS"], env["MOSTRADOR_MAX_CONCURRENCY"])
            if kind == "Job":
                assert doc["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade", name
                assert pod["containers"][0]["args"] == ["migrate"], name
    assert set(workers) == graphs, workers
    cron = {doc["metadata"]["name"]: doc["spec"] for _, doc in docs if doc["kind"] == "CronJob"}
    if "compras" in graphs:
        assert cron["mostrador-purchasing"]["schedule"] == "0 6 * * *", cron
    assert "mostrador-retention" in cron, cron
    print(f"{label}: invariants hold; workers (replicas, max runs, max concurrency): {workers}")


def check_python(docs, values):
    """The Python graphs' image and settings reach the api and the Python workers, and nothing
    else: a Rust worker given a langgraph.json would start Python runners it cannot run."""
    python = values["python"]
    image = f"{python['image']['repository']}:{python['image']['tag']}"
    plain = f"{values['image']['repository']}:{values['image']['tag']}"
    python_workers = {name for name, w in values["workers"].items() if w and w.get("python")}
    for _, doc in docs:
        if doc["kind"] not in ("Deployment", "Job", "CronJob"):
            continue
        name = doc["metadata"]["name"]
        spec = doc["spec"] if doc["kind"] != "CronJob" else doc["spec"]["jobTemplate"]["spec"]
        container = spec["template"]["spec"]["containers"][0]
        env = env_of(container)
        component = doc["metadata"]["labels"].get("app.kubernetes.io/component")
        graph = doc["metadata"]["labels"].get("mostrador.dev/graph")
        runs_python = component == "api" or (component == "worker" and graph in python_workers)
        assert container["image"] == (image if runs_python else plain), (name, container["image"])
        if component == "api":
            # The retail graphs keep a worker: the api serves them beside the project's.
            retail_workers = [
                d for _, d in docs
                if d["kind"] == "Deployment"
                and d["metadata"]["labels"].get("app.kubernetes.io/component") == "worker"
                and d["metadata"]["labels"].get("mostrador.dev/graph") not in python_workers
            ]
            assert (env.get("MOSTRADOR_EXAMPLE_GRAPHS") == "true") == bool(retail_workers), (name, env)
        if runs_python:
            assert env["MOSTRADOR_LANGGRAPH_CONFIG"] == python["config"], (name, env)
            assert env["MOSTRADOR_PYTHON"] == python["interpreter"], (name, env)
        else:
            assert "MOSTRADOR_LANGGRAPH_CONFIG" not in env, name
        # The graphs' own settings go to their workers, not to the api.
        has_graph_env = "envFrom" in container or "LANGSMITH_TRACING" in env
        assert has_graph_env == (component == "worker" and graph in python_workers), name
    print(f"python values: the api and the workers {sorted(python_workers)} run {image}, the rest {plain}")


def check_policy(docs, policy):
    """The api reads the policy the values give, from a ConfigMap, and rolls when it changes."""
    api = next(d for _, d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "mostrador-api")
    pod = api["spec"]["template"]["spec"]
    container = pod["containers"][0]
    maps = {d["metadata"]["name"]: d for _, d in docs if d["kind"] == "ConfigMap"}
    if policy is None:
        assert "MOSTRADOR_POLICY" not in env_of(container) and "mostrador-api-policy" not in maps
        return
    assert env_of(container)["MOSTRADOR_POLICY"] == "/etc/mostrador/policy.toml"
    assert maps["mostrador-api-policy"]["data"]["policy.toml"] == policy
    mount = next(m for m in container["volumeMounts"] if m["name"] == "policy")
    assert mount["mountPath"] == "/etc/mostrador" and mount["readOnly"] is True, mount
    volume = next(v for v in pod["volumes"] if v["name"] == "policy")
    assert volume["configMap"]["name"] == "mostrador-api-policy", volume
    assert "checksum/policy" in api["spec"]["template"]["metadata"]["annotations"]
    print("policy: mounted from its ConfigMap")


def must_fail(values, why):
    try:
        render(values)
    except Exception as err:  # noqa: BLE001 - any refusal is the expected outcome
        print(f"refused as it should: {why} ({type(err).__name__})")
        return
    sys.exit(f"accepted but should not: {why}")


def main():
    report = helm.lint(CHART, strict=True)
    problems = [m for m in report.get("messages", []) if m.get("severity", 0) >= 2]
    if problems or report.get("errors"):
        sys.exit(f"helm lint: {problems} {report.get('errors')}")
    print("helm lint (strict): ok")

    defaults = render(None)
    validate(defaults, "default values")
    check_invariants(defaults, "default values")

    with open(PRODUCTION) as f:
        production_values = yaml.safe_load(f)
    production = render(production_values)
    validate(production, "production values")
    check_invariants(production, "production values")
    assert any(d["kind"] == "HorizontalPodAutoscaler" for _, d in production)
    assert any(d["kind"] == "ServiceMonitor" for _, d in production)
    worker = next(d for _, d in production if d["metadata"]["name"] == "mostrador-worker-compras")
    env = env_of(worker["spec"]["template"]["spec"]["containers"][0])
    assert env["MODEL_BASE_URL"] == "http://litellm.models.svc:4000/v1" and env["MODEL_CONTEXT_WINDOW"] == "32768", env
    check_policy(defaults, None)
    check_policy(production, production_values["auth"]["policy"])

    with open(PYTHON) as f:
        python_values = yaml.safe_load(f)
    python = render(python_values)
    validate(python, "python values")
    check_invariants(python, "python values", {"tienda", "support_agent", "summarize_ticket,classify_ticket"})
    check_python(python, python_values)

    must_fail({"model": {"baseUrl": "http://gateway/v1"}}, "a model base URL without a context window")
    must_fail(
        {"workers": {"tienda": {"replicas": 1, "maxRuns": 4, "maxConcurrency": 2, "drainTimeoutSeconds": 60, "terminationGracePeriodSeconds": 30}}},
        "a grace period below the drain timeout",
    )
    must_fail({"workers": {"otro": {"replicas": 1}}}, "a worker without its capacity")
    must_fail({"auth": {"jwksUrl": "", "secret": {"name": "", "key": "k"}}}, "no way to verify tokens")
    agent = {"python": True, "replicas": 1, "maxRuns": 2, "maxConcurrency": 2, "drainTimeoutSeconds": 30, "terminationGracePeriodSeconds": 45}
    must_fail({"workers": {"agent": agent}}, "a Python worker without python.enabled")
    must_fail({"python": {"enabled": True}, "workers": {"agent": agent}}, "python.enabled without its image")
    must_fail({"python": {"enabled": True, "image": {"repository": "r", "tag": "1"}, "config": "langgraph.json"}}, "a relative langgraph.json path")
    print("chart: all checks passed")


main()
