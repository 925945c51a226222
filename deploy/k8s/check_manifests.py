#!/usr/bin/env python3
"""Checks deploy/k8s's manifests against each other and against the CONFIG they carry.

Usage: check_manifests.py [--config_out FILE] MANIFEST.yaml...

Parses every YAML document and checks what a cluster would only reveal at run time: the
Service is headless and selects the server pods; the StatefulSet names that Service, and its
replicas equal cluster.num_servers; the worker Job is Indexed with completions and
parallelism equal to cluster.num_workers; both binaries get --placement=kubernetes with the
StatefulSet's and Service's real names and the Service's port; every ConfigMap/Secret a pod
mounts exists and holds the keys the CONFIG's file paths need; workers request
nvidia.com/gpu and the CONFIG says device: CUDA; the CONFIG's checkpoint.dir is on a volume of
the StatefulSet's volumeClaimTemplates (a restarted server pod resumes its shard from it). Prints one line per problem, naming the file and object, and exits 1 if
any; --config_out writes the embedded CONFIG so the caller can validate it with Tamp itself.
"""
import argparse
import re
import sys

import yaml


class Checker:
    def __init__(self):
        self.problems = []
        self.objects = {}  # (kind, name) -> (file, object)

    def fail(self, where, message):
        self.problems.append(f"{where}: {message}")

    def load(self, path):
        with open(path) as f:
            try:
                docs = [d for d in yaml.safe_load_all(f) if d is not None]
            except yaml.YAMLError as e:
                self.fail(path, f"not valid YAML: {e}")
                return
        for doc in docs:
            if not isinstance(doc, dict) or "kind" not in doc or "metadata" not in doc:
                self.fail(path, "a document without kind/metadata")
                continue
            key = (doc["kind"], doc["metadata"].get("name", ""))
            if key in self.objects:
                self.fail(path, f"{key[0]} {key[1]} defined twice")
            self.objects[key] = (path, doc)

    def one(self, kind):
        found = [(n, fo) for (k, n), fo in self.objects.items() if k == kind]
        if len(found) != 1:
            self.fail("manifests", f"expected exactly one {kind}, found {len(found)}")
            return None, None, None
        name, (path, obj) = found[0]
        return name, path, obj


def flag(command, name):
    for arg in command:
        if arg.startswith(f"--{name}="):
            return arg.split("=", 1)[1]
    return None


def without_comments(config):
    """The CONFIG's text with its '#' comments cut (outside quoted strings), so a
    commented-out field does not count as written."""
    lines = []
    for line in config.splitlines():
        quoted = False
        for i, char in enumerate(line):
            if char == '"':
                quoted = not quoted
            elif char == "#" and not quoted:
                line = line[:i]
                break
        lines.append(line)
    return "\n".join(lines)


def config_count(config, field):
    m = re.search(rf"\b{field}\s*:\s*(\d+)", config)
    return int(m.group(1)) if m else None


def check_pod(c, where, pod_spec, statefulset, service, port, config_paths, claims=()):
    """Checks one pod template's container command and mounts (`claims`: the names of the
    volumes a StatefulSet's volumeClaimTemplates add); returns the container."""
    containers = pod_spec.get("containers", [])
    if len(containers) != 1:
        c.fail(where, f"expected one container, found {len(containers)}")
        return None
    container = containers[0]
    command = container.get("command", []) + container.get("args", [])
    expect = {"placement": "kubernetes", "k8s_statefulset": statefulset,
              "k8s_service": service, "base_port": str(port)}
    for name, value in expect.items():
        got = flag(command, name)
        if got != value:
            c.fail(where, f"--{name} is {got!r}, expected {value!r}")
    config_flag = flag(command, "config")
    volumes = {v["name"]: v for v in pod_spec.get("volumes", [])}
    mounted = {}  # file path in the container -> (kind, object name, key)
    for mount in container.get("volumeMounts", []):
        volume = volumes.get(mount["name"])
        if volume is None and mount["name"] in claims:
            continue
        if volume is None:
            c.fail(where, f"volumeMount {mount['name']} has no volume")
            continue
        for kind, ref, name_field in (("ConfigMap", "configMap", "name"),
                                      ("Secret", "secret", "secretName")):
            if ref not in volume:
                continue
            obj_name = volume[ref][name_field]
            if (kind, obj_name) not in c.objects:
                c.fail(where, f"volume {mount['name']} mounts {kind} {obj_name}, which no manifest defines")
                continue
            _, obj = c.objects[(kind, obj_name)]
            keys = set(obj.get("data", {})) | set(obj.get("stringData", {}))
            if "subPath" in mount:
                mounted[mount["mountPath"]] = (kind, obj_name, mount["subPath"])
            else:
                for key in keys:
                    mounted[f"{mount['mountPath'].rstrip('/')}/{key}"] = (kind, obj_name, key)
    for path in [config_flag] + config_paths:
        if path not in mounted:
            c.fail(where, f"{path} (from the command or the CONFIG) is not mounted from any ConfigMap or Secret key")
    return container


def check_volume_access(c, where, pod_spec, container, claims=()):
    """A pod that runs as a user other than root must be able to read its Secret's files and
    write its claimed volumes: a Secret mode without group or other read leaves the files to
    root (fsGroup gives the pod's group the group bits), and a claim without fsGroup stays
    root's on most storage."""
    pod_context = pod_spec.get("securityContext", {})
    context = {**pod_context, **(container or {}).get("securityContext", {})}
    user = context.get("runAsUser")
    if user == 0 or (user is None and not context.get("runAsNonRoot")):
        return
    who = f"user {user}" if user is not None else "the image's user (runAsNonRoot)"
    group = pod_context.get("fsGroup")
    volumes = {v["name"]: v for v in pod_spec.get("volumes", [])}
    for mount in (container or {}).get("volumeMounts", []):
        volume = volumes.get(mount["name"], {})
        if "secret" in volume:
            mode = volume["secret"].get("defaultMode", 0o644)
            if not (mode & 0o004 or (group is not None and mode & 0o040)):
                c.fail(where, f"Secret {volume['secret'].get('secretName')} is mounted with "
                              f"defaultMode {mode:04o}, which {who} cannot read: give the "
                              "group read (0440) and set securityContext.fsGroup")
        elif mount["name"] in claims and group is None:
            c.fail(where, f"volume {mount['name']} (a claim) is not writable by {who} without "
                          "securityContext.fsGroup")


def check_checkpoint_volume(c, where, spec, server, config):
    """The CONFIG's checkpoint.dir must be a mount of a volumeClaimTemplate: a server pod the
    StatefulSet restarts resumes its shard only from a volume that outlived the old pod."""
    m = re.search(r'\bcheckpoint\s*\{[^}]*\bdir\s*:\s*"([^"]+)"', config)
    if m is None:
        c.fail(where, "the CONFIG has no checkpoint { dir }: a server pod the StatefulSet "
                      "restarts would lose its shard, and the workers would be refused")
        return
    claims = {t["metadata"]["name"] for t in spec.get("volumeClaimTemplates", [])}
    directory = m.group(1).rstrip("/")
    on_claim = any(mount["name"] in claims and
                   (directory + "/").startswith(mount["mountPath"].rstrip("/") + "/")
                   for mount in (server or {}).get("volumeMounts", []))
    if not on_claim:
        c.fail(where, f"checkpoint.dir {m.group(1)} is not on a volumeClaimTemplate volume's "
                      "mountPath: a restarted server pod would not find its checkpoint")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config_out")
    parser.add_argument("manifests", nargs="+")
    args = parser.parse_args()
    c = Checker()
    for path in args.manifests:
        c.load(path)

    svc_name, svc_path, svc = c.one("Service")
    sts_name, sts_path, sts = c.one("StatefulSet")
    job_name, job_path, job = c.one("Job")
    cm_name, cm_path, cm = c.one("ConfigMap")
    if c.problems:
        print("\n".join(c.problems))
        return 1

    config_text = cm.get("data", {}).get("job.pbtxt")
    if config_text is None:
        c.fail(cm_path, f"ConfigMap {cm_name} has no job.pbtxt")
        config_text = ""
    config = without_comments(config_text)
    num_servers = config_count(config, "num_servers")
    num_workers = config_count(config, "num_workers")
    config_paths = re.findall(r'\b(?:cert_file|key_file|ca_file|job_token_file)\s*:\s*"([^"]+)"', config)

    where = f"{svc_path}: Service {svc_name}"
    if svc["spec"].get("clusterIP") != "None":
        c.fail(where, "must be headless (clusterIP: None) so each shard has its own DNS name")
    ports = svc["spec"].get("ports", [])
    port = ports[0]["port"] if len(ports) == 1 else None
    if port is None:
        c.fail(where, "expected exactly one port")

    where = f"{sts_path}: StatefulSet {sts_name}"
    spec = sts["spec"]
    if spec.get("serviceName") != svc_name:
        c.fail(where, f"serviceName is {spec.get('serviceName')!r}, the headless Service is {svc_name!r}")
    if spec.get("replicas") != num_servers:
        c.fail(where, f"replicas is {spec.get('replicas')}, the CONFIG's cluster.num_servers is {num_servers}")
    labels = spec["template"]["metadata"].get("labels", {})
    for k, v in svc["spec"].get("selector", {}).items():
        if labels.get(k) != v:
            c.fail(where, f"pod label {k}={labels.get(k)!r} does not match the Service selector {v!r}")
    for k, v in spec.get("selector", {}).get("matchLabels", {}).items():
        if labels.get(k) != v:
            c.fail(where, f"pod label {k}={labels.get(k)!r} does not match the selector {v!r}")
    claims = [t["metadata"]["name"] for t in spec.get("volumeClaimTemplates", [])]
    server = check_pod(c, where, spec["template"]["spec"], sts_name, svc_name, port, config_paths,
                       claims)
    check_checkpoint_volume(c, where, spec, server, config)
    check_volume_access(c, where, spec["template"]["spec"], server, claims)
    if server is not None:
        container_ports = [p.get("containerPort") for p in server.get("ports", [])]
        if port not in container_ports:
            c.fail(where, f"container ports {container_ports} do not include the Service port {port}")
        target = ports[0].get("targetPort", port) if ports else None
        if target != port:
            c.fail(f"{svc_path}: Service {svc_name}", f"targetPort {target} differs from port {port}, which the servers listen on")

    where = f"{job_path}: Job {job_name}"
    spec = job["spec"]
    if spec.get("completionMode") != "Indexed":
        c.fail(where, "completionMode must be Indexed (workers take their rank from JOB_COMPLETION_INDEX)")
    for field in ("completions", "parallelism"):
        if spec.get(field) != num_workers:
            c.fail(where, f"{field} is {spec.get(field)}, the CONFIG's cluster.num_workers is {num_workers}")
    worker_pod = spec["template"]["spec"]
    # A dead worker is restarted in its pod and rejoins (docs/deploy.md, "Worker restarts").
    if worker_pod.get("restartPolicy") != "OnFailure":
        c.fail(where, f"restartPolicy is {worker_pod.get('restartPolicy')!r}, expected 'OnFailure': "
                      "a worker that dies is restarted in its pod and rejoins the run")
    if not isinstance(spec.get("backoffLimit"), int) or spec["backoffLimit"] < 1:
        c.fail(where, f"backoffLimit is {spec.get('backoffLimit')!r}: at least 1 lets a dead worker "
                      "restart")
    worker = check_pod(c, where, worker_pod, sts_name, svc_name, port, config_paths)
    check_volume_access(c, where, worker_pod, worker)
    if worker is not None:
        script = " ".join(worker.get("command", []))
        if "TAMP_RESTART=1" not in script:
            c.fail(where, "the worker's command must set TAMP_RESTART=1 when it restarts, so that "
                          "it rejoins the run instead of starting it")
        resources = worker.get("resources", {})
        if "nvidia.com/gpu" not in resources.get("limits", {}):
            c.fail(where, "workers must request nvidia.com/gpu in resources.limits")
        elif not re.search(r"^\s*device\s*:\s*CUDA\b", config, re.M):
            c.fail(where, "workers request nvidia.com/gpu but the CONFIG does not say device: "
                          "CUDA: the GPUs would sit idle")

    if args.config_out:
        with open(args.config_out, "w") as f:
            f.write(config_text)
    if c.problems:
        print("\n".join(c.problems))
        return 1
    print(f"ok: {len(c.objects)} objects; {num_servers} servers at {sts_name}-<i>.{svc_name}:{port}, "
          f"{num_workers} workers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
