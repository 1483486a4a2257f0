/** The Control UI's entry: the shell and every page. */
import './app.ts';
import './pages/overview.ts';
import './pages/skills.ts';
import './pages/chat.ts';
import './pages/sessions.ts';
import './pages/agents.ts';
import './pages/pairing.ts';
import './pages/tokens.ts';
import './pages/jobs.ts';
import './pages/automations.ts';
import './pages/logs.ts';
import './pages/config.ts';
import './pages/tools.ts';
