"""Static policy options: parsing, gates, incompatible pairs, machine validation (fix (c)), reservation."""

from __future__ import annotations

import pytest
from helpers_cpu import fixture, machine

from numaplane.policy.cpu import ReservedCPUs, StaticPolicy, StaticPolicyOptions
from numaplane.policy.errors import PolicyConfigError
from numaplane.topology.cpuset import CPUSet
from numaplane.topology.document import topology_from_dict, topology_to_dict


def test_parse_go_bool_spellings() -> None:
    opts = StaticPolicyOptions.parse(
        {"full-pcpus-only": "T", "strict-cpu-reservation": "1", "align-by-socket": "False"}
    )
    assert opts == StaticPolicyOptions(full_pcpus_only=True, strict_cpu_reservation=True)
    assert opts.to_dict() == {"full-pcpus-only": "true", "strict-cpu-reservation": "true"}
    assert StaticPolicyOptions.parse({"full-pcpus-only": True}).full_pcpus_only


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"bogus": "true"}, 'unknown CPU Manager Policy option: "bogus"'),
        (
            {"full-pcpus-only": "yes"},
            'bad value for option "full-pcpus-only": strconv.ParseBool: parsing "yes": invalid syntax',
        ),
        (
            {"full-pcpus-only": "true", "distribute-cpus-across-cores": "true"},
            "static policy options full-pcpus-only and distribute-cpus-across-cores can not be used at the same time",
        ),
        (
            {"distribute-cpus-across-numa": "true", "distribute-cpus-across-cores": "true"},
            "static policy options distribute-cpus-across-numa and distribute-cpus-across-cores can not be used at the same time",
        ),
        (
            {"prefer-align-cpus-by-uncorecache": "true", "distribute-cpus-across-cores": "true"},
            "static policy options prefer-align-cpus-by-uncorecache and distribute-cpus-across-cores can not be used at the same time",
        ),
        (
            {"prefer-align-cpus-by-uncorecache": "true", "distribute-cpus-across-numa": "true"},
            "static policy options prefer-align-cpus-by-uncorecache and distribute-cpus-across-numa can not be used at the same time",
        ),
    ],
)
def test_parse_errors_use_kubelet_text(options: dict[str, str], message: str) -> None:
    with pytest.raises(PolicyConfigError) as err:
        StaticPolicyOptions.parse(options)
    assert str(err.value) == message


def test_feature_gates() -> None:
    with pytest.raises(PolicyConfigError, match='Alpha-level Options not enabled, but option "align-by-socket"'):
        StaticPolicyOptions.parse({"align-by-socket": "true"}, alpha_enabled=False)
    with pytest.raises(PolicyConfigError, match="Beta-level Options not enabled"):
        StaticPolicyOptions.parse({"distribute-cpus-across-numa": "true"}, beta_enabled=False)
    assert StaticPolicyOptions.parse(
        {"full-pcpus-only": "true"}, alpha_enabled=False, beta_enabled=False
    ).full_pcpus_only


def test_align_by_socket_machine_validation() -> None:
    with pytest.raises(PolicyConfigError, match=r"^Topolgy manager single-numa-node policy is incompatible"):
        StaticPolicy(
            fixture("topoDualSocketHT"), 0, {"align-by-socket": "true"}, topology_manager_policy="single-numa-node"
        )
    with pytest.raises(PolicyConfigError, match="number of sockets are more than number of NUMA"):
        StaticPolicy(fixture("fakeTopoMultiSocketDualSocketPerNumaHT"), 0, {"align-by-socket": "true"})


def test_fix_c_align_by_socket_without_socket_data_is_a_typed_error() -> None:
    # machineInfoDualNumaHT comes from a cAdvisor MachineInfo with NumSockets unset (0): the kubelet
    # would divide by zero while generating hints.
    with pytest.raises(PolicyConfigError, match="no sockets"):
        StaticPolicy(fixture("machineInfoDualNumaHT"), 0, {"align-by-socket": "true"})
    doc = topology_to_dict(fixture("topoDualSocketHT"))
    doc["num_sockets"] = 0
    with pytest.raises(PolicyConfigError, match="no sockets"):
        StaticPolicy(topology_from_dict(doc), 0, {"align-by-socket": "true"})
    StaticPolicy(fixture("machineInfoDualNumaHT"), 0, {})  # fine without the option


def test_reserved_by_count_takes_lowest_physical_cores() -> None:
    assert StaticPolicy(fixture("topoSingleSocketHT"), 2).reserved == CPUSet.parse("0,4")
    assert StaticPolicy(fixture("topoSingleSocketHT"), 1).reserved == CPUSet.parse("0")
    policy = StaticPolicy(fixture("topoSingleSocketHT"), "1,6")
    assert policy.reserved == CPUSet.parse("1,6")
    assert policy.reserved_physical == CPUSet.parse("1-2,5-6")
    assert policy.allocatable == CPUSet.parse("0,2-5,7")


def test_reserved_errors() -> None:
    with pytest.raises(PolicyConfigError) as err:
        StaticPolicy(fixture("topoDualSocketHT"), ReservedCPUs(1, CPUSet.parse("0-1")))
    assert str(err.value) == "[cpumanager] unable to reserve the required amount of CPUs (size of 0-1 did not equal 1)"
    with pytest.raises(PolicyConfigError, match=r"size of  did not equal 13"):
        StaticPolicy(fixture("topoDualSocketHT"), 13)
    with pytest.raises(PolicyConfigError, match="invalid reserved CPU list"):
        StaticPolicy(fixture("topoDualSocketHT"), "0-x")
    with pytest.raises(PolicyConfigError, match="unknown CPU ID: 40"):
        StaticPolicy(fixture("topoDualSocketHT"), "0,40")


def test_reserved_from_millicores_rounds_up() -> None:
    assert ReservedCPUs.from_millicores(500, 600).count == 2
    assert ReservedCPUs.from_millicores(0, 1000).count == 1
    assert ReservedCPUs.from_millicores(0, 0).count == 0


def test_options_by_name_are_applied() -> None:
    policy = StaticPolicy(machine(), 0, {"distribute-cpus-across-cores": "true"})
    assert policy.options.distribute_cpus_across_cores
