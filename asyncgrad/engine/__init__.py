"""The backward engine on asyncio (see ``engine.py`` for the notes that hold it together).

Import the parts from their modules (``asyncgrad.engine.engine``, ``.graph_task``, ...): this
package module imports nothing, so that a low module may take ``current_graph_task`` from
``graph_task`` without loading the engine.
"""
