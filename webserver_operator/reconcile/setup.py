"""What wakes the WebServer reconciler, declared next to it (controller-runtime's ``SetupWithManager``).

- For(WebServer): every WebServer event asks for its own key.
- Owns(Deployment, Service): only the children the operator labelled (``CHILD_LABEL_SELECTOR``), each waking the
  WebServer that controls it, or, for an orphan, the one its instance label names (so it can be adopted).
- Watches(Service deleted): a deleted Service frees a nodePort, so WebServers waiting on a problem look again now
  instead of at their next slow requeue.
- Bookkeeping on WebServer events: the ``webserver_operator_managed_webservers`` gauge, and the Event recorder
  forgetting a deleted WebServer's de-duplication memory.

Called by ``manager.manager`` with the shared informer cache and the client; hands back the controller to run.
"""

from __future__ import annotations

from webserver_operator import metrics
from webserver_operator.builders import CHILD_LABEL_SELECTOR
from webserver_operator.core.settings import ControllerSettings
from webserver_operator.core.vocabulary import ApiRequests, EventType, KubeObject
from webserver_operator.kube.resources import DEPLOYMENTS, SERVICES, WEBSERVERS
from webserver_operator.reconcile.events import EventRecorder
from webserver_operator.reconcile.reconciler import Caches, WebServerReconciler
from webserver_operator.runtime.builder import ControllerBuilder
from webserver_operator.runtime.cache import InformerCache
from webserver_operator.runtime.controller import Controller
from webserver_operator.runtime.enqueue import keys_on_delete

CONTROLLER_NAME = "webserver"


def setup_webserver_controller(cache: InformerCache, *, api: ApiRequests, settings: ControllerSettings) -> Controller:
    """Declare the WebServer controller on ``cache`` and return it (not yet running).

    ``api`` is the client the reconciler writes with: the no-retry view, so the work queue does the backing off.
    """
    webservers = cache.group(WEBSERVERS)
    caches = Caches(
        webservers=webservers,
        deployments=cache.group(DEPLOYMENTS, label_selector=CHILD_LABEL_SELECTOR),
        services=cache.group(SERVICES, label_selector=CHILD_LABEL_SELECTOR),
    )
    recorder = EventRecorder(api)
    reconciler = WebServerReconciler(api=api, caches=caches, recorder=recorder)

    def bookkeeping(event_type: EventType, obj: KubeObject, _old: KubeObject | None) -> None:
        if event_type == "DELETED":
            recorder.forget(str((obj.get("metadata") or {}).get("uid", "")))
        metrics.MANAGED_WEBSERVERS.set(len(webservers))

    webservers.add_handler(bookkeeping)
    return (
        ControllerBuilder(CONTROLLER_NAME, cache, settings)
        .for_(WEBSERVERS)
        .owns(DEPLOYMENTS, label_selector=CHILD_LABEL_SELECTOR)
        .owns(SERVICES, label_selector=CHILD_LABEL_SELECTOR)
        .watches(SERVICES, keys_on_delete(reconciler.keys_with_problems), label_selector=CHILD_LABEL_SELECTOR)
        .complete(reconciler)
    )
