"""Registers the conformance plugin (options, parametrization, result rows); see harness/plugin.py."""

pytest_plugins = ["harness.plugin"]
