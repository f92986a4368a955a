"""The fixed part of a generated CLI: its docstring and the runtime code that builds the
argparse parser from the embedded tool list. Kept apart from cligen.py because it is text
written into every generated script (Python 3.8+, standard library only), not code run here.
"""

_DOC = '''"""Call the tools of an agentenv environment over its REST /step endpoint.

One subcommand per tool; run with --help, or COMMAND --help. Standard library only.
"""

import argparse
import http.client
import ipaddress
import json
import math
import os
import socket
import sys
import urllib.error
import urllib.parse
import urllib.request
'''

_RUNTIME = r'''
CALL_FAILED, USAGE, UNREACHABLE = 1, 2, 3
METAVARS = {"string": "STRING", "integer": "INTEGER", "number": "NUMBER"}
EPILOG = """environment variables:
  AGENTENV_URL       server base URL (default %(url)s)
  AGENTENV_ROLE      role to act as%(role)s
  AGENTENV_TOKEN     bearer token
  AGENTENV_INSTANCE  instance id (default: the default instance)
  AGENTENV_TIMEOUT   seconds to wait for an answer (default 60)

exit status:
  0  success: the result is printed on stdout as JSON
  1  the call failed (tool error, invalid arguments, denied, unknown tool, timeout,
     refused credentials): the message is printed on stderr
  2  usage error
  3  the server cannot be reached, does not answer in time, or answers badly"""


class Failure(Exception):
    """A one-line message and the exit status that goes with it."""

    def __init__(self, message, status):
        Exception.__init__(self, message)
        self.status = status


class Flag(argparse.Action):
    """A boolean option pair: --name sends true, --no-name sends false."""

    def __init__(self, option_strings, dest, default=argparse.SUPPRESS, required=False, help=None):
        argparse.Action.__init__(
            self, option_strings, dest, nargs=0, default=default, required=required, help=help
        )

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, option_string == self.option_strings[0])

    def format_usage(self):
        return " | ".join(self.option_strings)


def integer(text):
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected an integer, got %r" % text) from None


def number(text):
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError("expected a finite number, got %r" % text)
    return value


def seconds(text):
    value = number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("expected a positive number of seconds, got %r" % text)
    return value


def no_constant(name):
    raise ValueError("%s is not JSON" % name)


def json_value(kind):
    def convert(text):
        try:
            value = json.loads(text, parse_constant=no_constant)
        except ValueError:
            if kind == "json":
                return text
            example = "'[\"a\", \"b\"]'" if kind == "array" else "'{\"key\": \"value\"}'"
            raise argparse.ArgumentTypeError(
                "expected a JSON %s such as %s, got %r" % (kind, example, text)
            ) from None
        wanted = {"array": list, "object": dict}.get(kind)
        if wanted is not None and not isinstance(value, wanted):
            raise argparse.ArgumentTypeError("expected a JSON %s, got %r" % (kind, text))
        return value

    convert.__name__ = "JSON " + kind
    return convert


CONVERTERS = {"string": str, "integer": integer, "number": number}


def escape(text):
    return text.replace("%", "%%")


def add_connection(parser, top, taken=()):
    """--url, --role, --token, --instance, --timeout. On a subcommand they have no
    default (the values given before the command stand) and yield to the tool's options."""
    env = os.environ.get
    role_default = env("AGENTENV_ROLE") or SPEC["role"]
    options = [
        ("--url", env("AGENTENV_URL") or SPEC["url"], "URL",
         "server base URL (env AGENTENV_URL; default %s)" % SPEC["url"]),
        ("--role", role_default, "ROLE",
         "role to act as, sent as the AgentEnv-Role header, which only a trusted local server "
         "honours (env AGENTENV_ROLE; default: %s)" % (SPEC["role"] or "the server's")),
        ("--token", env("AGENTENV_TOKEN") or None, "TOKEN",
         "bearer token; the server takes the role from it (env AGENTENV_TOKEN)"),
        ("--instance", env("AGENTENV_INSTANCE") or None, "ID",
         "call this instance (/instances/ID/step) (env AGENTENV_INSTANCE)"),
        ("--timeout", env("AGENTENV_TIMEOUT") or "60", "SECONDS",
         "seconds to wait for an answer (env AGENTENV_TIMEOUT; default 60)"),
    ]
    title = "connection options" if top else "connection options (also accepted before COMMAND)"
    group = parser.add_argument_group(title)
    for flag, default, metavar, text in options:
        if flag in taken:
            continue
        group.add_argument(
            flag,
            dest=flag[2:],
            metavar=metavar,
            default=default if top else argparse.SUPPRESS,
            type=seconds if flag == "--timeout" else None,
            help=escape(text),
        )


def add_params(parser, params):
    required = parser.add_argument_group("required options")
    optional = parser.add_argument_group("tool options")
    for param in params:
        group = required if param["required"] else optional
        dest = "arg:" + param["name"]
        text = escape(param["help"])
        if param["type"] == "boolean":
            group.add_argument(
                param["flag"], param["negative"], dest=dest, action=Flag,
                required=param["required"], help=text,
            )
            continue
        convert = CONVERTERS.get(param["type"]) or json_value(param["type"])
        group.add_argument(
            param["flag"],
            dest=dest,
            type=convert,
            choices=param.get("choices"),
            metavar=None if "choices" in param else METAVARS.get(param["type"], "JSON"),
            required=param["required"],
            default=argparse.SUPPRESS,
            help=text,
        )


def build_parser():
    """The parser, built from SPEC."""
    formatter = argparse.RawDescriptionHelpFormatter
    version = SPEC["version"]
    parser = argparse.ArgumentParser(
        description="Call the tools of the agentenv environment %r over its REST /step\n"
        "endpoint. One command per tool; COMMAND --help describes its options." % SPEC["name"],
        epilog=EPILOG % {
            "url": SPEC["url"],
            "role": " (default %s)" % SPEC["role"] if SPEC["role"] else "",
        },
        formatter_class=formatter,
        allow_abbrev=False,
    )
    parser.add_argument(
        "--version",
        action="version",
        version="%s %s (generated by %s)" % (SPEC["name"], version or "", SPEC["generator"]),
    )
    add_connection(parser, top=True)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", dest="command")
    commands.required = True
    listing = commands.add_parser(
        "list-tools",
        help="List the tools the server lets this role call (JSON).",
        description="Ask the server which tools this role may call; prints them as JSON.",
        formatter_class=formatter,
        allow_abbrev=False,
    )
    listing.set_defaults(tool=None)
    add_connection(listing, top=False)
    for tool in SPEC["tools"]:
        description = tool["description"]
        if "%(prog)" in description:
            description = escape(description)
        sub = commands.add_parser(
            tool["command"],
            aliases=tool["aliases"],
            help=escape(tool["summary"]),
            description=description,
            formatter_class=formatter,
            allow_abbrev=False,
        )
        sub.set_defaults(tool=tool)
        add_params(sub, tool["params"])
        flags = {p["flag"] for p in tool["params"]} | {p.get("negative") for p in tool["params"]}
        add_connection(sub, top=False, taken=flags)
    return parser


def is_loopback(host):
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def step_url(parser, options):
    base = options.url.rstrip("/")
    parts = urllib.parse.urlsplit(base)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        parser.error("--url: expected an http(s) URL such as %s, got %r" % (SPEC["url"], options.url))
    if options.instance:
        return base + "/instances/" + urllib.parse.quote(options.instance, safe="") + "/step"
    return base + "/step"


def headers(parser, options):
    out = {
        "Content-Type": "application/json",
        "Accept": "application/json",
        "User-Agent": "%s (%s)" % (SPEC["name"], SPEC["generator"]),
    }
    for flag, name, value in (
        ("--role", "AgentEnv-Role", options.role),
        ("--token", "Authorization", "Bearer " + options.token if options.token else None),
    ):
        if not value:
            continue
        if any(ord(c) < 32 or ord(c) > 126 for c in value):
            parser.error("%s: only printable ASCII characters can travel in a header" % flag)
        out[name] = value
    return out


def post(url, headers, body, timeout):
    """POST the body; returns (status, raw answer) or raises Failure."""
    request = urllib.request.Request(
        url, data=json.dumps(body).encode("utf-8"), headers=headers, method="POST"
    )
    host = urllib.parse.urlsplit(url).hostname or ""
    # A proxy from the environment would only get in the way of a local server.
    handlers = [urllib.request.ProxyHandler({})] if is_loopback(host) else []
    opener = urllib.request.build_opener(*handlers)
    where = url.rsplit("/step", 1)[0]
    try:
        with opener.open(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        try:
            raw = exc.read()
        except (OSError, http.client.HTTPException):
            raw = b""
        return exc.code, raw
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, socket.timeout):
            raise Failure("no answer from %s within %g s" % (where, timeout), UNREACHABLE)
        reason = getattr(exc.reason, "strerror", None) or exc.reason
        raise Failure(
            "cannot reach %s: %s (is the environment served? agent-env serve ENV)"
            % (where, reason),
            UNREACHABLE,
        ) from None
    except socket.timeout:
        raise Failure("no answer from %s within %g s" % (where, timeout), UNREACHABLE) from None
    except (OSError, http.client.HTTPException) as exc:
        raise Failure("lost the connection to %s: %s" % (where, exc or type(exc).__name__), UNREACHABLE) from None


def text_of(answer):
    parts = [c.get("text", "") for c in answer.get("content") or [] if isinstance(c, dict)]
    return "\n".join(p for p in parts if isinstance(p, str))


def error_of(answer):
    error = answer.get("error") if isinstance(answer, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return "%s: %s" % (error.get("kind", "error"), error["message"])
    return None


def emit(text):
    try:
        sys.stdout.write(text + "\n")
    except UnicodeEncodeError:
        sys.stdout.write(text.encode("ascii", "backslashreplace").decode("ascii") + "\n")


def report(status, raw, listing):
    """Print the answer; returns the exit status or raises Failure."""
    try:
        answer = json.loads(raw.decode("utf-8"))
    except ValueError:
        snippet = " ".join(raw[:120].decode("utf-8", "replace").split()) or "an empty body"
        raise Failure(
            "the server answered HTTP %d with something that is not JSON: %s" % (status, snippet),
            UNREACHABLE,
        ) from None
    if isinstance(answer, dict) and "isError" in answer and "content" in answer:
        if answer["isError"]:
            raise Failure(error_of(answer) or text_of(answer) or "the call failed", CALL_FAILED)
        structured = answer.get("structuredContent")
        if structured is not None:
            emit(json.dumps(structured, indent=2, ensure_ascii=False))
        else:
            emit(text_of(answer))
        return 0
    if 200 <= status < 300 and listing:
        emit(json.dumps(answer, indent=2, ensure_ascii=False))
        return 0
    message = error_of(answer) or "unexpected answer"
    if status >= 500 or 200 <= status < 300:
        raise Failure("the server failed (HTTP %d): %s" % (status, message), UNREACHABLE)
    if status == 401:
        message += " (pass --token or set AGENTENV_TOKEN)"
    raise Failure("HTTP %d %s" % (status, message), CALL_FAILED)


def main(argv=None):
    """Parse the command line, make the call, print the answer; returns the exit status."""
    parser = build_parser()
    options = parser.parse_args(argv)
    tool = getattr(options, "tool", None)
    if tool is None:
        body = {"action": "list_tools"}
    else:
        arguments = {}
        for param in tool["params"]:
            key = "arg:" + param["name"]
            if hasattr(options, key):
                arguments[param["name"]] = getattr(options, key)
        body = {"action": "call_tool", "tool_name": tool["tool"], "arguments": arguments}
    url = step_url(parser, options)
    sent = headers(parser, options)
    try:
        status, raw = post(url, sent, body, options.timeout)
        return report(status, raw, listing=tool is None)
    except Failure as exc:
        sys.stderr.write("%s: error: %s\n" % (parser.prog, exc))
        return exc.status


if __name__ == "__main__":
    try:
        code = main()
        sys.stdout.flush()
    except KeyboardInterrupt:
        code = 130
    except BrokenPipeError:  # e.g. piped into head: not an error worth a traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    sys.exit(code)
'''
