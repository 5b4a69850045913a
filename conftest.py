"""Registers the conformance plugin (options, parametrization, result rows); see harness/plugin/."""

pytest_plugins = ["harness.plugin"]
