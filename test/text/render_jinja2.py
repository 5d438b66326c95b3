#!/usr/bin/env python3
"""Renders a chat template with Jinja2 the way Hugging Face transformers'
apply_chat_template does: an ImmutableSandboxedEnvironment with trim_blocks,
lstrip_blocks and the loop-controls extension; `tojson` as json.dumps with
ensure_ascii=False and no key sorting; the globals raise_exception and
strftime_now. The reference side of the chat-template tests.

usage: render_jinja2.py TEMPLATE_FILE VARS.json   (prints the rendering)
"""
import datetime
import json
import sys

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                      separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.datetime.now().strftime(fmt)


def main():
    template = open(sys.argv[1], encoding="utf-8").read()
    variables = json.load(open(sys.argv[2], encoding="utf-8"))
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    sys.stdout.write(env.from_string(template).render(**variables))


if __name__ == "__main__":
    main()
