"""asyncio drivers of the trusted services, the embedded broker and the amqtt plugin."""
