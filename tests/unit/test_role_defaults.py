"""Each role's defaults/main.yml and its meta/argument_specs.yml say the same thing: every public default is an
option of the main entry point, and an option's documented default is the value the role really starts from."""

import pathlib

import pytest
import yaml

ROLES = sorted(p for p in (pathlib.Path(__file__).parents[2] / 'roles').iterdir() if (p / 'meta').is_dir())


def _load(path):
    return yaml.safe_load(path.read_text()) or {}


def _entry_points(role):
    return _load(role / 'meta' / 'argument_specs.yml')['argument_specs']


def _templated(value):
    return isinstance(value, str) and '{{' in value


def disagreements(defaults, entry_points):
    """What the defaults and the specs disagree on, one line each."""
    lines = []
    main = entry_points.get('main', {}).get('options') or {}
    for name in defaults:
        if not name.startswith('__') and name not in main:
            lines.append('%s: a default with no option in the main entry point' % name)
    for entry, spec in entry_points.items():
        for name, option in (spec.get('options') or {}).items():
            if name not in defaults:
                continue
            value = defaults[name]
            if 'default' in option:
                if _templated(value):
                    lines.append('%s (%s): the spec gives a default, the role computes one: %r' % (name, entry, value))
                elif option['default'] != value:
                    lines.append('%s (%s): the spec says %r, defaults/main.yml %r'
                                 % (name, entry, option['default'], value))
            elif value is not None and not _templated(value):
                lines.append('%s (%s): the spec gives no default, defaults/main.yml %r' % (name, entry, value))
    return lines


@pytest.mark.parametrize('role', ROLES, ids=lambda p: p.name)
def test_the_defaults_are_the_documented_ones(role):
    assert disagreements(_load(role / 'defaults' / 'main.yml'), _entry_points(role)) == []


def test_a_disagreement_is_named():
    specs = {'main': {'options': {'r_a': {'type': 'int', 'default': 1}, 'r_b': {'type': 'str'},
                                  'r_c': {'type': 'str', 'default': 'x'}}}}
    defaults = {'r_a': 2, 'r_b': 'set', 'r_c': '{{ other }}', 'r_d': 0, '__r_private': 1}
    assert disagreements(defaults, specs) == [
        'r_d: a default with no option in the main entry point',
        "r_a (main): the spec says 1, defaults/main.yml 2",
        "r_b (main): the spec gives no default, defaults/main.yml 'set'",
        "r_c (main): the spec gives a default, the role computes one: '{{ other }}'",
    ]
