"""Every registered workload is a Workload: each member the Protocol declares is there, of its type,
and the members that replaced name lists in the config say what those lists said."""

import ast
import dataclasses
import inspect
import typing

import pytest

import sim.workloads.capabilities
from sim.keys import Issue
from sim.workloads import WORKLOADS, Capabilities, Workload

CLASS_VARS = typing.get_type_hints(Workload)  # SECTION, KEYS, CAPABILITIES, WORK_UNIT: ClassVar[type]
# its own members and those it takes from the chip's side of it (sim/chip/program.py: ChipWorkload)
METHODS = {n for klass in Workload.__mro__ if klass.__module__.startswith("sim.") for n, v in vars(klass).items()
           if not n.startswith("_") and n not in CLASS_VARS and (callable(v) or isinstance(v, (property, classmethod)))}


def test_the_protocol_declares_what_the_config_and_the_reports_ask():
    assert {"SECTION", "KEYS", "CAPABILITIES", "WORK_UNIT"} <= set(CLASS_VARS)
    assert {"kind", "config_issues", "from_config", "work_items", "program", "system_program", "figures",
            "input_figures", "system_figures"} <= METHODS


@pytest.mark.parametrize("name", WORKLOADS.names())
def test_every_registered_workload_has_every_member_of_its_type(name):
    cls = WORKLOADS.get(name)
    for member, hint in CLASS_VARS.items():
        assert typing.get_origin(hint) is typing.ClassVar, member
        want = typing.get_args(hint)[0]
        value = getattr(cls, member)
        base = typing.get_origin(want) or want  # tuple[str, ...] is checked as a tuple of str
        assert isinstance(value, base), f"{name}.{member} is not a {base.__name__}"
        if base is tuple and typing.get_args(want)[1:] == (Ellipsis,):
            item = typing.get_args(want)[0]
            assert all(isinstance(v, item) for v in value), f"{name}.{member} holds a non-{item.__name__}"
    for member in METHODS:
        assert hasattr(cls, member), f"{name} lacks {member}"
    for member in ("config_issues", "from_config"):
        assert inspect.ismethod(getattr(cls, member)), f"{name}.{member} is not a classmethod"
    assert isinstance(inspect.getattr_static(cls, "work_items"), property)
    params = cls()  # every workload's parameters are a dataclass with defaults
    assert params.kind in WORKLOADS
    assert isinstance(params.work_items, int)


@pytest.mark.parametrize("name", WORKLOADS.names())
def test_a_workload_has_only_the_program_of_where_it_runs(name):
    cls = WORKLOADS.get(name)
    params = cls()
    other = params.program if cls.CAPABILITIES.system else params.system_program
    with pytest.raises(TypeError, match=params.kind):
        other(None)
    if cls.CAPABILITIES.system:  # a system workload has no chip run, so no chip figures either
        assert params.figures([], 1.0) == ({}, {}) and params.input_figures(None) == {}


def test_the_members_say_what_the_name_lists_said():
    """The config's old lists: MAPS_A_GRAPH = ("dataflow", "pipeline"), the system workloads, the
    request servers that preempt, the one that prices its steps on a socket's grid, and the run
    diagnosis' names for work items."""
    kinds = WORKLOADS.names()

    def having(flag):
        return {k for k in kinds if getattr(WORKLOADS.get(k).CAPABILITIES, flag)}

    assert having("maps_graph") == {"dataflow", "pipeline"}
    assert having("system") == {"collective", "expert-parallel", "pipeline", "serve-system"}
    assert having("preempts") == {"kv-decode", "spec-decode", "serve", "serve-system"}
    assert having("socket") == {"serve-system"}
    units = {k: WORKLOADS.get(k).WORK_UNIT for k in ("kv-decode", "spec-decode", "moe", "race", "dataflow")}
    assert units == {"kv-decode": "sequences", "spec-decode": "sequences", "moe": "steps", "race": "trials",
                     "dataflow": "work items"}


def test_only_dataflow_checks_the_run_config_itself():
    """Its tile writes from one CU to one MU must arrive in order: no jitter; the others check nothing."""
    for name in WORKLOADS.names():
        cls = WORKLOADS.get(name)
        for jitter in (0, 3):
            got = cls.config_issues({"noc": {"jitter": jitter}, "memory": {}, "workload": {}})
            assert all(isinstance(i, Issue) for i in got)
            assert [i.path for i in got] == (["noc.jitter"] if name == "dataflow" and jitter else [])


def test_capabilities_are_one_frozen_record_whose_every_field_says_what_it_changes():
    caps = Capabilities(system=True, maps_graph=False)
    assert (caps.socket, caps.preempts) == (False, False)  # the two every kind must state have no default
    with pytest.raises(TypeError):
        Capabilities(system=False)  # type: ignore[call-arg]
    with pytest.raises(dataclasses.FrozenInstanceError):
        caps.system = False  # type: ignore[misc]
    with pytest.raises(ValueError, match="socket"):  # only a system workload has sockets to price on
        Capabilities(system=False, maps_graph=False, socket=True)
    body = next(n for n in ast.parse(inspect.getsource(sim.workloads.capabilities)).body
                if isinstance(n, ast.ClassDef) and n.name == "Capabilities").body
    documented = {a.target.id for a, doc in zip(body, body[1:]) if isinstance(a, ast.AnnAssign)
                  and isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) and doc.value.value.strip()}
    assert documented == {f.name for f in dataclasses.fields(Capabilities)}


@pytest.mark.parametrize("flag", ["SYSTEM", "MAPS_GRAPH", "PREEMPTS", "SOCKET"])
def test_no_workload_declares_a_loose_flag_beside_its_record(flag):
    """The record replaced four class flags: one left on a class would be read by nothing."""
    for name in WORKLOADS.names():
        assert not hasattr(WORKLOADS.get(name), flag), f"{name}.{flag}"
