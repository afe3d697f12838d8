"""Herald client: typed producers and consumers for the Herald wire protocol, sync and asyncio."""

from .aio import AsyncClient, AsyncSubscription, Backoff
from .errors import (
    AuthenticationError,
    ClientClosedError,
    ClockError,
    ConnectionError_,
    ForbiddenError,
    HeraldError,
    NotFoundError,
    RetryableError,
    ValidationError,
    error_class,
)
from .models import (
    UNSET,
    Ack,
    Action,
    Authorization,
    BadgeClear,
    Clock,
    Communication,
    ConsumerPartition,
    Consumers,
    ConsumersReply,
    ConsumerStatus,
    Content,
    DeleteConsumer,
    DeleteConsumerReply,
    Delivery,
    Erase,
    FocusDefine,
    FocusOff,
    FocusOn,
    FocusWindow,
    HelloReply,
    Mute,
    Opened,
    Presentation,
    ProvisionalKeep,
    ProvisionalTurnOff,
    RegisterApp,
    Reply,
    Request,
    Route,
    Settings,
    Snooze,
    Submit,
    SummarySchedule,
    Warning,
    Withdraw,
)
from .routing import RoutingTable, fnv1a64, partition_of, routing_user
from .sync import Client, Subscription

__all__ = [
    "UNSET", "Ack", "Action", "AsyncClient", "AsyncSubscription", "AuthenticationError", "Authorization", "Backoff",
    "BadgeClear", "Client", "ClientClosedError", "Clock", "ClockError", "Communication", "ConnectionError_", "ConsumerPartition",
    "ConsumerStatus", "Consumers", "ConsumersReply", "Content", "DeleteConsumer", "DeleteConsumerReply", "Delivery", "Erase", "FocusDefine", "FocusOff", "FocusOn", "FocusWindow", "ForbiddenError", "HelloReply", "HeraldError",
    "Mute", "NotFoundError", "Opened", "Presentation", "ProvisionalKeep", "ProvisionalTurnOff", "RegisterApp", "Reply",
    "Request", "RetryableError", "Route", "RoutingTable", "Settings", "Snooze", "Submit", "Subscription", "SummarySchedule", "ValidationError",
    "Warning", "Withdraw", "error_class", "fnv1a64", "partition_of", "routing_user",
]
