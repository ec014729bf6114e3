"""Tunables, their allowed values, defaults and constraints."""

from __future__ import annotations

import pytest

from pytest_r3 import DeclarationError
from pytest_r3.model.tunables import TuningSpace


def test_first_value_is_the_default_and_constraints_filter_the_product():
    space = TuningSpace({"TILE": [8, 16, 32], "UNROLL": [1, 2, 4]},
                        constraints=["TILE % UNROLL == 0", "TILE * UNROLL <= 64"])
    assert space.default == {"TILE": 8, "UNROLL": 1}
    assert space.size == 9
    valid = list(space.iter_valid())
    assert {"TILE": 32, "UNROLL": 4} not in valid  # 128 > 64
    assert {"TILE": 16, "UNROLL": 4} in valid
    assert len(valid) == 8
    assert space.describe() == [
        "TILE in [8, 16, 32]", "UNROLL in [1, 2, 4]",
        "constraint: TILE % UNROLL == 0", "constraint: TILE * UNROLL <= 64"]


def test_no_tunables_is_a_space_of_one():
    space = TuningSpace(None)
    assert space.default == {}
    assert list(space.iter_valid()) == [{}]
    assert space.describe() == []


def test_callable_constraints_take_tunables_as_keywords():
    def square_tiles(TILE_I, TILE_J):  # noqa: N803 - tunables are C macro names
        return TILE_I == TILE_J

    space = TuningSpace({"TILE_I": [8, 16], "TILE_J": [8, 16]}, constraints=[square_tiles])
    assert list(space.iter_valid()) == [{"TILE_I": 8, "TILE_J": 8},
                                        {"TILE_I": 16, "TILE_J": 16}]
    assert space.describe()[-1] == "constraint: square_tiles"
    with pytest.raises(DeclarationError, match="violate constraint 'square_tiles'"):
        space.resolve({"TILE_J": 16})


def test_explicit_defaults():
    space = TuningSpace({"A": [1, 2, 4]}, defaults={"A": 4})
    assert space.default == {"A": 4}
    assert space.resolve({}) == {"A": 4}
    assert space.resolve({"A": 2}) == {"A": 2}


def test_value_outside_the_declared_set_is_refused():
    space = TuningSpace({"UNROLL": [1, 2, 4]}, where="kernel 'k'")
    with pytest.raises(DeclarationError) as excinfo:
        space.resolve({"UNROLL": 3})
    assert str(excinfo.value) == (
        "kernel 'k': tunable UNROLL=3 is not one of its declared values [1, 2, 4]")


def test_unknown_tunable_is_refused_with_the_known_ones():
    space = TuningSpace({"UNROLL": [1, 2]}, where="kernel 'k'")
    with pytest.raises(DeclarationError, match="unknown tunable 'UNRL'; tunables: UNROLL"):
        space.resolve({"UNRL": 2})


def test_constraints_that_exclude_everything():
    with pytest.raises(DeclarationError) as excinfo:
        TuningSpace({"A": [1, 2], "B": [1, 2]}, constraints=["A + B > 10"], where="kernel 'k'")
    message = str(excinfo.value)
    assert message.startswith("kernel 'k': the constraints exclude every combination")
    assert "A + B > 10" in message
    assert "Relax a constraint" in message


def test_default_that_violates_a_constraint():
    with pytest.raises(DeclarationError, match="default values .* violate constraint 'A > 1'"):
        TuningSpace({"A": [1, 2]}, constraints=["A > 1"])
    # naming a valid default fixes it
    assert TuningSpace({"A": [1, 2]}, constraints=["A > 1"], defaults={"A": 2}).default == {"A": 2}


def test_constraint_naming_an_unknown_tunable():
    with pytest.raises(DeclarationError) as excinfo:
        TuningSpace({"TILE": [8, 16]}, constraints=["TILE % UNROLL == 0"], where="kernel 'k'")
    assert str(excinfo.value) == (
        "kernel 'k': constraint 'TILE % UNROLL == 0' names UNROLL, which is not tunable; "
        "tunables: TILE")


def test_constraints_may_use_safe_builtins_only():
    space = TuningSpace({"A": [1, 2, 3]}, constraints=["max(A, 2) == 2"])
    assert [v["A"] for v in space.iter_valid()] == [1, 2]
    with pytest.raises(DeclarationError, match="names open, which is not tunable"):
        TuningSpace({"A": [1]}, constraints=["open('x') or A"])


def test_constraint_that_is_not_python():
    with pytest.raises(DeclarationError, match="not a valid Python expression"):
        TuningSpace({"A": [1]}, constraints=["A >"])
    with pytest.raises(DeclarationError, match="must be a string expression or a callable"):
        TuningSpace({"A": [1]}, constraints=[42])


def test_constraint_that_raises_is_reported():
    with pytest.raises(DeclarationError,
                       match=r"constraint '64 // A > 1' raised ZeroDivisionError"):
        TuningSpace({"A": [0, 1]}, constraints=["64 // A > 1"], defaults={"A": 1})


@pytest.mark.parametrize(
    ("tunables", "problem"),
    [
        ({"2BAD": [1]}, "tunable name '2BAD' is not a valid C macro name"),
        ({"A": []}, "tunable A has no allowed values"),
        ({"A": "124"}, "tunable A needs a list of allowed values"),
        ({"A": 4}, "tunable A needs a list of allowed values"),
        ({"A": [1, 2, 1]}, "tunable A lists a value twice"),
        ({"A": [1, None]},
         r"tunable A value None must be a number, bool or string \(it becomes -DA=value\)"),
    ],
)
def test_malformed_tunables(tunables, problem):
    with pytest.raises(DeclarationError, match=problem):
        TuningSpace(tunables)


def test_defaults_naming_unknown_tunables():
    with pytest.raises(DeclarationError, match="defaults name unknown tunable.*B; tunables: A"):
        TuningSpace({"A": [1]}, defaults={"B": 2})
