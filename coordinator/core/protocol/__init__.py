"""The connect group protocol's vocabulary: error codes, sentinel epochs, requests and responses.

These are the state machine's inputs and outputs (seed 000 "Public Interfaces"), with the field
names of the seed in snake_case. Each message is declared once, as a msgspec Struct whose JSON names
are the seed's (`rename="pascal"`: `member_epoch` is `MemberEpoch`), with its documentation and
what the HTTP decoder checks of each field (DESIGN §7): the server decodes a request body straight
into the message the core takes, and encodes the core's answer as it is. msgspec is a serialization
library, not I/O, so the core may declare its messages with it.
Nullable request fields follow the seed: None means "unchanged since the last heartbeat".

`common` holds the codes, reasons, `Message` and what every handler returns; `connect` the worker
protocol (seed 000); `classic` the classic protocol (seed 004); `admin` the admin messages.
"""

from coordinator.core.protocol.admin import *  # noqa: F403
from coordinator.core.protocol.classic import *  # noqa: F403
from coordinator.core.protocol.common import *  # noqa: F403
from coordinator.core.protocol.connect import *  # noqa: F403
