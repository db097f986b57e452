"""The Spark side: the session, the driver JVM's start-up (command, class archive, log), the jars, the Java
helpers and their sources, and the one-call py4j readers."""
