package cli

// The RabbitMQ driver: registers amqp:// and amqps://.
import _ "github.com/acemq/acemq/rabbitmq"
