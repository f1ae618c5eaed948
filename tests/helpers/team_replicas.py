"""Two ``serve`` replicas on one PostgreSQL behind nginx, and answering a prompt on the page."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from setup_agent.secrets.vault import Vault
from setup_agent.store import PendingApprovals, owner_alive
from setup_agent.store.database import Store
from tests.browser.serve import Served, make_catalog, stop_serve
from tests.helpers.mcp_face import REPO, face_env, mcp_setup_argv
from tests.helpers.team_balancer import (
    PUBLIC_HOST,
    REPLICA_HOSTS,
    Client,
    free_common_port,
    nginx_binary,
)
from tests.helpers.team_gateway import start
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.skipif(
    nginx_binary() is None and os.environ.get("CI") != "true",
    reason="nginx is not installed (scripts/test.sh installs it)",
)


class Team:
    def __init__(self, root: Path, database_url: str, canary: str) -> None:
        self.root = root
        self.vault = Vault.in_memory()
        key = root / "team.key"
        self.vault.export_key(key)
        self.env = {
            "MCP_SETUP_DATABASE_URL": database_url,
            "MCP_SETUP_DATA_KEY_FILE": str(key),
            "MCP_SETUP_PUBLIC_HOST": PUBLIC_HOST,
            "MCP_SETUP_CATALOG_DIR": str(make_catalog(root, canary)),
            "MCP_SETUP_CONSENT": "ask",
        }
        self.database_url = database_url
        self.port = free_common_port()
        self.replicas: dict[str, Served] = {}

    def cli(self, *args: str) -> str:
        done = subprocess.run(
            mcp_setup_argv(*args),
            env=face_env(self.root / "admin", **self.env),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=scaled(60),
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.split()[0]

    def start(self) -> list[str]:
        """Both replicas; returns their ids in the order of REPLICA_HOSTS."""
        ids = []
        for n, host in enumerate(REPLICA_HOSTS):
            root = self.root / f"replica-{n}"
            root.mkdir()
            served, _scheme = start(root, "--host", host, "--port", str(self.port), **self.env)
            answer = httpx.get(f"http://{host}:{self.port}/healthz", trust_env=False, timeout=scaled(30))
            assert answer.status_code == 200 and answer.json()["ok"] is True
            ready = httpx.get(f"http://{host}:{self.port}/readyz", trust_env=False, timeout=scaled(30))
            assert ready.status_code == 200, ready.text
            self.replicas[answer.json()["replica"]] = served
            ids.append(answer.json()["replica"])
        return ids

    def stop(self) -> None:
        for served in self.replicas.values():
            stop_serve(served, signal.SIGTERM)

    def pending_consents(self) -> list[str]:
        """What the user sees waiting (as `mcp-setup approve` lists it): the consents' ids."""
        with Store(self.database_url, self.vault) as store:
            items = PendingApprovals(store, owner="test:0").pending()
        return [i.item_id for i in items if i.kind == "consent" and owner_alive(i.owner)]

    def pending_consent(self) -> str:
        items = self.pending_consents()
        assert items, "no consent waits for the user"
        return items[-1]

    def logs(self) -> str:
        return "\n".join(s.stderr() for s in self.replicas.values())


@pytest.fixture
def team(tmp_path: Path, postgres_url: str, canary: str) -> Iterator[Team]:
    team = Team(tmp_path, postgres_url, canary)
    try:
        yield team
    finally:
        team.stop()


def answer_on_the_page(client: Client, url: str, value: str, replica: str) -> None:
    """The user opens the one-time link (issued by another replica) and types the value there."""
    link = urlsplit(url)
    assert link.netloc == client.host  # the link leads to the balancer, not to a replica
    key = re.search(r"t=([^&]+)", link.query)
    assert key is not None
    client.steer(replica)
    page = client._record("open the secret page", client.http.get(f"{link.path}?{link.query}"))
    assert page.status_code == 200 and "<form" in page.text, page.text[:300]
    assert client.last_replica() == replica
    client.steer(replica)
    saved = client.http.post(
        link.path,
        data={"t": key.group(1), "value": value, "action": "submit"},
        headers={"Origin": f"{client.scheme}://{client.host}"},
    )
    client._record("answer the secret", saved)
    assert saved.status_code == 200 and "saved" in saved.text, saved.text[:300]
