"""A tiny upstream-style environment folder: written with upstream's protocol SDK, served on
MCP_HOST / MCP_PORT (the test runs it with .venv-upstream's python). It keeps notes, which
its data plane serves (data/reset, data/add, data/get) as upstream's servers do, and takes
the gateway's virtual clock the way they do (the clock extension's sync_time, then GET
env_get_time_url)."""

import httpx
from agentenv_protocol import AgentEnvEnvironment, environment_card, extension, tool
from agentenv_protocol.agent_env_environment import add_data, get_data, reset_data
from agentenv_protocol.types import DataPart


@environment_card(name="upstream-folder")
class FolderEnv(AgentEnvEnvironment):
    env_get_time_url = None

    def __init__(self) -> None:
        self.notes: list[dict] = []
        super().__init__()

    @tool(name="reverse", annotations={"readOnlyHint": True})
    def reverse(self, text: str) -> str:
        """Return the text backwards."""
        return text[::-1]

    @tool(name="add_note")
    def add_note(self, text: str) -> dict:
        """Keep a note; the note with its id."""
        note = {"id": f"n{len(self.notes) + 1}", "text": text}
        self.notes.append(note)
        return note

    @tool(name="list_notes", annotations={"readOnlyHint": True})
    def list_notes(self) -> dict:
        """Every note."""
        return {"notes": self.notes}

    @tool(name="what_time")
    def what_time(self) -> str:
        """The time this server believes it is: the gateway's virtual time once synced."""
        if self.env_get_time_url is None:
            return "wall clock"
        return httpx.get(self.env_get_time_url, timeout=10).json()["virtual_time"]

    @extension(uri="urn:agentenv:clock/v1", description="Follow the gateway's virtual clock.")
    async def sync_time(self, env_get_time_url: str) -> dict:
        """Keep the URL to read the gateway's virtual time from."""
        self.env_get_time_url = env_get_time_url
        async with httpx.AsyncClient() as client:
            answer = await client.get(env_get_time_url, timeout=10)
            answer.raise_for_status()
        return {"gateway_virtual_time": answer.json()["virtual_time"]}

    @reset_data
    def forget(self) -> None:
        """Drop every note."""
        self.notes.clear()

    @add_data
    def load(self, parts: list) -> None:
        """Notes from data parts ({"notes": [...]})."""
        for part in parts:
            if part.kind == "data":
                notes = part.data.get("notes", [])
                if not isinstance(notes, list):
                    raise ValueError("notes must be a list of notes")
                self.notes.extend(notes)

    @get_data
    def export(self) -> list:
        """The notes, as one data part."""
        return [DataPart(data={"notes": self.notes})]


if __name__ == "__main__":
    FolderEnv().serve()
