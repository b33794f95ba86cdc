"""Kueue's Configuration, in the three shapes users hand it to us.

Theory of operation: the same settings arrive as the upstream
``config.kueue.x-k8s.io/v1beta1`` or ``v1beta2`` kind ``Configuration``
(top-level fields, no ``spec``), possibly wrapped in the ``kueue-manager-config``
ConfigMap under ``controller_manager_config.yaml``, or as the Red Hat build of
Kueue operator's ``kueue.openshift.io/v1`` kind ``Kueue``, whose ``spec.config``
has names of its own and which the operator translates to the first. Each
shape is read into the one ``Configuration`` type, following the operator's
translation and the defaults Kueue applies, which differ between v1beta1 and
v1beta2 for ``waitForPodsReady`` and ``fairSharing``. Unlike Kueue >= 0.19,
an absent v1beta2 ``waitForPodsReady`` section leaves it disabled
(``WAIT_FOR_PODS_READY_WHEN_ABSENT``). The rules field by field:
docs/design/manifests.md.
"""

from __future__ import annotations

from dataclasses import replace

from kuota.api.duration import DurationError, duration_seconds
from kuota.api.fields import (
    INT32_MAX,
    FieldError,
    Raw,
    boolean,
    child,
    dns1123_label,
    dns1123_subdomain,
    enum,
    index,
    integer,
    keyed,
    label_selector,
    mapping,
    qualified_name,
    seq,
    string,
    unique_strings,
)
from kuota.api.types import (
    AdmissionFairSharingConfig,
    CapacitySource,
    Configuration,
    CounterSource,
    DeviceClassMapping,
    FairSharingConfig,
    LabelSelector,
    WaitForPodsReady,
)
from kuota.quantity import QuantityError, parse_quantity

WAIT_FOR_PODS_READY_WHEN_ABSENT = False
_V1BETA1_TIMEOUT_SECONDS = 5 * 60
_V1BETA2_TIMEOUT_SECONDS = 30 * 60
_SAMPLING_INTERVAL_SECONDS = 5 * 60
_OPERATOR_HALF_LIFE_SECONDS = 30 * 60
_KUEUE_NAMESPACE = "kueue-system"  # Kueue's default ``namespace``
_OPERATOR_MANAGED_LABEL = "kueue.openshift.io/managed"  # the operator's namespace opt-in
_STRATEGIES = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")
_STRATEGY_SETS = ((_STRATEGIES[0],), (_STRATEGIES[1],), _STRATEGIES)


def _seconds(value: object, field: str) -> int:
    try:
        return duration_seconds(value)
    except DurationError as e:
        raise FieldError(field, str(e)) from None


def _weight(value: object, field: str, *, numbers_only: bool) -> int:
    if numbers_only and isinstance(value, str):
        raise FieldError(field, "must be a number, not a string")
    try:
        return parse_quantity(value)
    except QuantityError as e:
        raise FieldError(field, str(e)) from None


# --------------------------------------------------------------------------- mappings


def _source_driver(raw: Raw, field: str) -> str | None:
    driver = raw.get("driver")
    if driver is not None:
        dns1123_subdomain(driver, child(field, "driver"))
    return driver if isinstance(driver, str) else None


def _device_selector(raw: Raw, field: str) -> str:
    cel_path = child(child(field, "deviceSelector"), "cel")
    cel = mapping(
        mapping(raw.get("deviceSelector"), child(field, "deviceSelector")).get("cel"), cel_path
    )
    return string(cel.get("expression"), child(cel_path, "expression"))


def _counter_source(raw: Raw, field: str) -> CounterSource:
    name = dns1123_label(raw.get("name"), child(field, "name"))
    driver = _source_driver(raw, field)
    # deviceSelector narrows the devices whose counters are charged; CounterSource
    # has no field for it yet, so it is checked for shape and otherwise ignored.
    _device_selector(raw, field)
    return CounterSource(name=name, driver=driver)


def _capacity_source(raw: Raw, field: str) -> CapacitySource:
    # A device's capacity is named like an attribute: a C identifier, optionally
    # with a domain ("memory", "gpu.nvidia.com/memory").
    name = qualified_name(raw.get("name"), child(field, "name"))
    driver = _source_driver(raw, field)
    return CapacitySource(name=name, driver=driver, device_selector=_device_selector(raw, field))


_SOURCE_TYPES = {"Counter": "counter", "Capacity": "capacity"}


def _mapping_sources(
    value: object, field: str
) -> tuple[CounterSource | None, CapacitySource | None]:
    """A mapping's sources: Kueue v0.19's ``[{counter: {...}}]`` / ``[{capacity: {...}}]``,
    or the same with article 000's ``type: Counter`` / ``type: Capacity`` beside it.
    One kind per mapping (Kueue's rule) and, in kuota, one source of it."""
    counter: CounterSource | None = None
    capacity: CapacitySource | None = None
    for j, item in enumerate(seq(value, field)):
        path = index(field, j)
        raw = mapping(item, path, required=True)
        source_type = string(raw.get("type"), child(path, "type"))
        if source_type and source_type not in _SOURCE_TYPES:
            raise FieldError(
                child(path, "type"),
                f"unsupported source type {source_type!r}: want Counter or Capacity",
            )
        present = [k for k in ("counter", "capacity") if raw.get(k) is not None]
        if not present:
            wanted = _SOURCE_TYPES.get(source_type, "counter")
            raise FieldError(child(path, wanted), "required: exactly one source type must be set")
        if len(present) > 1:
            raise FieldError(path, "exactly one of counter and capacity must be set in a source")
        kind = present[0]
        if source_type and _SOURCE_TYPES[source_type] != kind:
            raise FieldError(
                child(path, "type"), f"type {source_type} does not match the {kind} field set"
            )
        if (kind == "counter" and capacity is not None) or (
            kind == "capacity" and counter is not None
        ):
            raise FieldError(
                path, "counter and capacity sources cannot be mixed in one mapping (as in Kueue)"
            )
        body = mapping(raw.get(kind), child(path, kind))
        if kind == "counter":
            if counter is not None:
                raise FieldError(path, "at most one counter source per mapping is supported")
            counter = _counter_source(body, child(path, kind))
        else:
            if capacity is not None:
                raise FieldError(path, "at most one capacity source per mapping is supported")
            capacity = _capacity_source(body, child(path, kind))
    return counter, capacity


def device_class_mappings(value: object, field: str) -> tuple[DeviceClassMapping, ...]:
    out: list[DeviceClassMapping] = []
    resource_of: dict[str, str] = {}  # device class -> quota resource of its first mapping
    # device class -> ("counter" | "capacity", name) sources charged so far
    counters_of: dict[str, list[tuple[str, str]]] = {}
    for i, item in enumerate(seq(value, field, max_items=16)):
        path = index(field, i)
        raw = mapping(item, path, required=True)
        name = qualified_name(raw.get("name"), child(path, "name"))
        if any(m.name == name for m in out):
            raise FieldError(child(path, "name"), f"duplicate mapping name {name!r}")
        classes_path = child(path, "deviceClassNames")
        classes = unique_strings(raw.get("deviceClassNames"), classes_path, max_items=8)
        if not classes:
            raise FieldError(classes_path, "at least one device class name is required")
        counter, capacity = _mapping_sources(raw.get("sources"), child(path, "sources"))
        source = ("counter", counter.name) if counter else None
        if capacity is not None:
            source = ("capacity", capacity.name)
        for j, device_class in enumerate(classes):
            qualified_name(device_class, index(classes_path, j))
            previous = resource_of.get(device_class)
            if previous is None:
                resource_of[device_class] = name
                counters_of[device_class] = [source] if source else []
                continue
            # Kueue allows one DeviceClass in several mappings only when each
            # charges a different counter (e.g. memory and compute slices); kuota
            # allows the same of capacities, and never counters beside capacities.
            seen = counters_of[device_class]
            if source is None or not seen:
                raise FieldError(
                    index(classes_path, j), f"device class already mapped to resource {previous}"
                )
            if source[0] != seen[0][0]:
                raise FieldError(
                    index(classes_path, j),
                    f"device class already has {seen[0][0]} sources (mapping {previous}); "
                    f"counter and capacity sources cannot be mixed for one device class",
                )
            if source in seen:
                raise FieldError(
                    index(classes_path, j),
                    f"device class already has a {source[0]} source for {source[0]} {source[1]!r}",
                )
            seen.append(source)
        out.append(
            DeviceClassMapping(
                name=name, device_class_names=classes, counter=counter, capacity=capacity
            )
        )
    return tuple(out)


def _exclude_prefixes(value: object, field: str) -> tuple[str, ...]:
    return tuple(string(v, index(field, i), required=True) for i, v in enumerate(seq(value, field)))


# --------------------------------------------------------------------------- upstream


def _requeuing(raw: Raw, field: str, base: WaitForPodsReady) -> WaitForPodsReady:
    """``requeuingStrategy`` on top of ``base`` (Kueue defaults: Eviction, 60s, 3600s, no limit)."""
    limit = raw.get("backoffLimitCount")
    return replace(
        base,
        requeuing_timestamp=enum(
            raw.get("timestamp"),
            child(field, "timestamp"),
            ("Eviction", "Creation"),
            default="Eviction",
        ),
        backoff_limit_count=None
        if limit is None
        else integer(limit, child(field, "backoffLimitCount"), minimum=0, maximum=INT32_MAX),
        backoff_base_seconds=integer(
            raw.get("backoffBaseSeconds"),
            child(field, "backoffBaseSeconds"),
            default=60,
            minimum=0,
            maximum=INT32_MAX,
        ),
        backoff_max_seconds=integer(
            raw.get("backoffMaxSeconds"),
            child(field, "backoffMaxSeconds"),
            default=3600,
            minimum=0,
            maximum=INT32_MAX,
        ),
    )


def _wait_for_pods_ready(value: object, field: str, *, version: str) -> WaitForPodsReady:
    if value is None:
        if WAIT_FOR_PODS_READY_WHEN_ABSENT and version != "v1beta1":
            return WaitForPodsReady(
                enable=True,
                timeout_seconds=_V1BETA2_TIMEOUT_SECONDS,
                recovery_timeout_seconds=_V1BETA2_TIMEOUT_SECONDS,
            )
        return WaitForPodsReady()
    raw = mapping(value, field)
    v1beta1 = version == "v1beta1"
    enable = boolean(raw.get("enable"), child(field, "enable"), default=not v1beta1)
    timeout_path = child(field, "timeout")
    if raw.get("timeout") is None:
        timeout = _V1BETA1_TIMEOUT_SECONDS if v1beta1 else _V1BETA2_TIMEOUT_SECONDS
    else:
        timeout = _seconds(raw.get("timeout"), timeout_path)
        if timeout == 0:
            if v1beta1:
                raise FieldError(timeout_path, "must be greater than 0")
            timeout = _V1BETA2_TIMEOUT_SECONDS  # v1beta2 defaults a zero timeout
    block = boolean(
        raw.get("blockAdmission"), child(field, "blockAdmission"), default=enable and v1beta1
    )
    recovery: int | None = timeout
    if raw.get("recoveryTimeout") is not None:
        recovery = _seconds(raw.get("recoveryTimeout"), child(field, "recoveryTimeout")) or None
    strategy_path = child(field, "requeuingStrategy")
    return _requeuing(
        mapping(raw.get("requeuingStrategy"), strategy_path),
        strategy_path,
        WaitForPodsReady(
            enable=enable,
            timeout_seconds=timeout,
            block_admission=block,
            recovery_timeout_seconds=recovery,
        ),
    )


def _fair_sharing(value: object, field: str, *, version: str) -> FairSharingConfig:
    if value is None:
        return FairSharingConfig()
    raw = mapping(value, field)
    enable = boolean(raw.get("enable"), child(field, "enable"), default=version != "v1beta1")
    path = child(field, "preemptionStrategies")
    strategies = tuple(
        string(s, index(path, i), required=True)
        for i, s in enumerate(seq(raw.get("preemptionStrategies"), path))
    )
    if not strategies:
        strategies = _STRATEGIES
    if strategies not in _STRATEGY_SETS:
        raise FieldError(
            path, f"unsupported list {list(strategies)}: want {[list(s) for s in _STRATEGY_SETS]}"
        )
    return FairSharingConfig(enable=enable, preemption_strategies=strategies)


def _admission_fair_sharing(value: object, field: str) -> AdmissionFairSharingConfig | None:
    if value is None:
        return None
    raw = mapping(value, field)
    half_life = 0
    if raw.get("usageHalfLifeTime") is not None:
        half_life = _seconds(raw.get("usageHalfLifeTime"), child(field, "usageHalfLifeTime"))
    sampling = _SAMPLING_INTERVAL_SECONDS
    if raw.get("usageSamplingInterval") is not None:
        sampling = _seconds(raw.get("usageSamplingInterval"), child(field, "usageSamplingInterval"))
        sampling = sampling or _SAMPLING_INTERVAL_SECONDS
    weights_path = child(field, "resourceWeights")
    weights: list[tuple[str, int]] = []
    for key, weight in mapping(raw.get("resourceWeights"), weights_path).items():
        path = keyed(weights_path, str(key))
        weights.append((qualified_name(key, path), _weight(weight, path, numbers_only=True)))
    return AdmissionFairSharingConfig(
        usage_half_life_seconds=half_life,
        usage_sampling_interval_seconds=sampling,
        resource_weights=tuple(sorted(weights)),
    )


def upstream_configuration(raw: Raw, *, version: str, base: str = "") -> Configuration:
    """Read an upstream Kueue Configuration (``base`` prefixes error fields)."""
    resources_path = child(base, "resources")
    resources = mapping(raw.get("resources"), resources_path)
    return Configuration(
        device_class_mappings=device_class_mappings(
            resources.get("deviceClassMappings"), child(resources_path, "deviceClassMappings")
        ),
        exclude_resource_prefixes=_exclude_prefixes(
            resources.get("excludeResourcePrefixes"),
            child(resources_path, "excludeResourcePrefixes"),
        ),
        wait_for_pods_ready=_wait_for_pods_ready(
            raw.get("waitForPodsReady"), child(base, "waitForPodsReady"), version=version
        ),
        fair_sharing=_fair_sharing(
            raw.get("fairSharing"), child(base, "fairSharing"), version=version
        ),
        admission_fair_sharing=_admission_fair_sharing(
            raw.get("admissionFairSharing"), child(base, "admissionFairSharing")
        ),
        manage_jobs_without_queue_name=boolean(
            raw.get("manageJobsWithoutQueueName"),
            child(base, "manageJobsWithoutQueueName"),
            default=False,
        ),
        managed_jobs_namespace_selector=label_selector(
            raw.get("managedJobsNamespaceSelector"), child(base, "managedJobsNamespaceSelector")
        ),
        namespace=string(raw.get("namespace"), child(base, "namespace")) or _KUEUE_NAMESPACE,
    )


# --------------------------------------------------------------------------- Red Hat operator


def _gang_scheduling(raw: Raw, field: str) -> WaitForPodsReady:
    policy = enum(
        raw.get("policy"),
        child(field, "policy"),
        ("ByWorkload", "ByWorkloadDefaults", "None"),
        default="",
    )
    if policy == "None" or (not policy and not WAIT_FOR_PODS_READY_WHEN_ABSENT):
        return WaitForPodsReady()
    by_path = child(field, "byWorkload")
    by = mapping(raw.get("byWorkload"), by_path) if policy == "ByWorkload" else {}
    admission = enum(
        by.get("admission"),
        child(by_path, "admission"),
        ("Parallel", "Sequential"),
        default="Parallel",
    )
    timeout = (
        integer(
            by.get("timeoutSeconds"),
            child(by_path, "timeoutSeconds"),
            default=0,
            minimum=0,
            maximum=86400,
        )
        or _V1BETA2_TIMEOUT_SECONDS
    )
    recovery_raw = by.get("recoveryTimeoutSeconds")
    recovery = (
        timeout
        if recovery_raw is None
        else integer(
            recovery_raw, child(by_path, "recoveryTimeoutSeconds"), minimum=0, maximum=86400
        )
        or None
    )
    rq_path = child(by_path, "requeuingStrategy")
    rq = mapping(by.get("requeuingStrategy"), rq_path)
    limit = integer(
        rq.get("retryLimit"), child(rq_path, "retryLimit"), default=0, minimum=0, maximum=200
    )
    return WaitForPodsReady(
        enable=True,
        timeout_seconds=timeout,
        block_admission=admission == "Sequential",
        recovery_timeout_seconds=recovery,
        requeuing_timestamp=enum(
            rq.get("timeReference"),
            child(rq_path, "timeReference"),
            ("Eviction", "Creation"),
            default="Eviction",
        ),
        backoff_limit_count=limit or None,
        backoff_base_seconds=integer(
            rq.get("backoffBaseSeconds"),
            child(rq_path, "backoffBaseSeconds"),
            default=0,
            minimum=0,
            maximum=3600,
        )
        or 60,
        backoff_max_seconds=integer(
            rq.get("backoffMaxSeconds"),
            child(rq_path, "backoffMaxSeconds"),
            default=0,
            minimum=0,
            maximum=7200,
        )
        or 3600,
    )


def _operator_admission_fair_sharing(raw: Raw, field: str) -> AdmissionFairSharingConfig | None:
    mode = enum(
        raw.get("configuration"), child(field, "configuration"), ("Default", "Custom"), default=""
    )
    if not mode:
        return None
    if mode == "Default":
        return AdmissionFairSharingConfig(usage_half_life_seconds=_OPERATOR_HALF_LIFE_SECONDS)
    custom_path = child(field, "custom")
    custom = mapping(raw.get("custom"), custom_path)
    weights_path = child(custom_path, "resourceWeights")
    weights: list[tuple[str, int]] = []
    for i, item in enumerate(seq(custom.get("resourceWeights"), weights_path, max_items=16)):
        path = index(weights_path, i)
        entry = mapping(item, path, required=True)
        name = qualified_name(entry.get("name"), child(path, "name"))
        if any(n == name for n, _ in weights):
            raise FieldError(child(path, "name"), f"duplicate resource {name!r}")
        weights.append(
            (
                name,
                _weight(
                    string(entry.get("weight"), child(path, "weight"), required=True),
                    child(path, "weight"),
                    numbers_only=False,
                ),
            )
        )
    return AdmissionFairSharingConfig(
        usage_half_life_seconds=integer(
            custom.get("usageHalfLifeTimeSeconds"),
            child(custom_path, "usageHalfLifeTimeSeconds"),
            default=0,
            minimum=0,
            maximum=31536000,
        ),
        usage_sampling_interval_seconds=integer(
            custom.get("usageSamplingIntervalSeconds"),
            child(custom_path, "usageSamplingIntervalSeconds"),
            default=0,
            minimum=0,
            maximum=3600,
        )
        or _SAMPLING_INTERVAL_SECONDS,
        resource_weights=tuple(sorted(weights)),
    )


def operator_configuration(spec: Raw, *, base: str = "spec") -> Configuration:
    """Read the ``spec`` of a Red Hat build of Kueue ``Kueue`` object."""
    path = child(base, "config")
    config = mapping(spec.get("config"), path)
    resources_path = child(path, "resources")
    resources = mapping(config.get("resources"), resources_path)
    preemption_path = child(path, "preemption")
    management_path = child(path, "workloadManagement")
    # labelPolicy None manages Jobs without the queue label. The operator always opts
    # namespaces in by label; the selector only matters then, so it is kept only then.
    manage = (
        enum(
            mapping(config.get("workloadManagement"), management_path).get("labelPolicy"),
            child(management_path, "labelPolicy"),
            ("QueueName", "None"),
            default="",
        )
        == "None"
    )
    policy = enum(
        mapping(config.get("preemption"), preemption_path).get("preemptionPolicy"),
        child(preemption_path, "preemptionPolicy"),
        ("Classical", "FairSharing"),
        default="Classical",
    )
    return Configuration(
        device_class_mappings=device_class_mappings(
            resources.get("deviceClassMappings"), child(resources_path, "deviceClassMappings")
        ),
        wait_for_pods_ready=_gang_scheduling(
            mapping(config.get("gangScheduling"), child(path, "gangScheduling")),
            child(path, "gangScheduling"),
        ),
        fair_sharing=FairSharingConfig(enable=policy == "FairSharing"),
        admission_fair_sharing=_operator_admission_fair_sharing(
            mapping(config.get("admissionFairSharing"), child(path, "admissionFairSharing")),
            child(path, "admissionFairSharing"),
        ),
        manage_jobs_without_queue_name=manage,
        managed_jobs_namespace_selector=LabelSelector(
            match_labels=((_OPERATOR_MANAGED_LABEL, "true"),)
        )
        if manage
        else None,
    )
